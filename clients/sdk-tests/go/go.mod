module github.com/spurdb/spur/clients/sdk-tests/go

go 1.26

require (
	github.com/posthog/posthog-go v1.5.2
	gopkg.in/segmentio/analytics-go.v3 v3.1.0
)

require (
	github.com/segmentio/backo-go v1.1.0 // indirect
	github.com/xtgo/uuid v0.0.0-20140804021211-a0b114877d4c // indirect
)
