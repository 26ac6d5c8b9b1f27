package capture

// ParseUserAgent is a stand-in until the parser lands.
func ParseUserAgent(ua string) (browser, os, deviceType string) { return "", "", "" }
