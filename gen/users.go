package gen

import "github.com/spurdb/spur/event"

// UserStream streams the users of a Config in user order (user 0 first),
// with the same ids and attributes as the Generator's events. It is not safe
// for concurrent use.
type UserStream struct {
	p    *plan
	ids  idBlock
	next int64
}

// NewUserStream validates cfg and returns a UserStream positioned before the
// first user. Unlike New it does no pass over the users. It returns an error
// naming the field when cfg is out of range.
func NewUserStream(cfg Config) (*UserStream, error) {
	p, err := newPlan(cfg)
	if err != nil {
		return nil, err
	}
	return &UserStream{p: p, ids: idBlock{width: p.idWidth}}, nil
}

// Users returns the number of users the stream yields.
func (s *UserStream) Users() int64 { return s.p.cfg.Users }

// Next fills ev with the next user's properties in the users-file form of
// event.Event: UserID, Time = the signup (install) time in UTC µs, Name
// empty, and Props platform, channel, country (strings) and signup_time
// (time, equal to Time), reusing ev.Props' capacity. It reports false after
// the last user. The strings are immutable; it does not allocate in steady
// state (one allocation per 1024 users, for their ids).
func (s *UserStream) Next(ev *event.Event) bool {
	if s.next == s.p.cfg.Users {
		return false
	}
	i := s.next
	s.next++
	r := newRNG(s.p.seed, i, streamUser)
	a := s.p.attrs(s.p.rawWeight(i), &r)
	ev.UserID = s.ids.id(i, s.p.cfg.Users)
	ev.Time = a.signup
	ev.Name = ""
	ev.InsertID = ""
	ev.Pos = event.Pos{}
	ev.Props = append(ev.Props[:0],
		event.Prop{Name: PropPlatform, Value: event.Value{Type: event.TypeString, Str: platforms[a.platform]}},
		event.Prop{Name: PropChannel, Value: event.Value{Type: event.TypeString, Str: channels[a.channel]}},
		event.Prop{Name: PropCountry, Value: event.Value{Type: event.TypeString, Str: countries[a.country]}},
		event.Prop{Name: PropSignupTime, Value: event.Value{Type: event.TypeTime, Int: a.signup}},
	)
	return true
}
