package event

import (
	"errors"
	"strconv"
	"unicode/utf8"
)

// Field names used in the RowErrors of ValidateEvent and ValidateUser.
const (
	FieldUserID = "user_id"
	FieldEvent  = "event"
)

// ValidateUserID checks a user id against docs/analytics.md §1: non-empty, valid UTF-8,
// at most MaxUserIDBytes bytes. The error says which rule is broken; it
// does not quote the id. It does not allocate when the id is valid.
func ValidateUserID(id string) error {
	switch {
	case id == "":
		return errors.New("empty user id")
	case len(id) > MaxUserIDBytes:
		return errors.New("user id is " + strconv.Itoa(len(id)) + " bytes long (at most " + strconv.Itoa(MaxUserIDBytes) + ")")
	case !utf8.ValidString(id):
		return errors.New("user id is not valid UTF-8")
	}
	return nil
}

// ValidateEventName checks an event name against docs/analytics.md §1: non-empty, valid
// UTF-8, at most MaxEventNameBytes bytes. Like ValidateUserID it does not
// allocate when the name is valid.
func ValidateEventName(name string) error {
	switch {
	case name == "":
		return errors.New("empty event name")
	case len(name) > MaxEventNameBytes:
		return errors.New("event name is " + strconv.Itoa(len(name)) + " bytes long (at most " + strconv.Itoa(MaxEventNameBytes) + ")")
	case !utf8.ValidString(name):
		return errors.New("event name is not valid UTF-8")
	}
	return nil
}

// ValidateEvent checks the limits of docs/analytics.md §1 on an event: ValidateUserID,
// ValidateEventName, and every property name valid (ValidatePropName) and
// not repeated. The timestamp is checked by the parsers (ParseTime,
// EpochToMicros), not here, and insert_id is unconstrained. It returns a
// *RowError at ev.Pos whose Field is FieldUserID, FieldEvent or the
// property name.
func ValidateEvent(ev *Event) error {
	if err := ValidateUserID(ev.UserID); err != nil {
		return &RowError{Pos: ev.Pos, Field: FieldUserID, Msg: err.Error()}
	}
	if err := ValidateEventName(ev.Name); err != nil {
		return &RowError{Pos: ev.Pos, Field: FieldEvent, Msg: err.Error()}
	}
	return checkProps(ev)
}

// ValidateUser checks a user-property row (a row of a users file, Name
// empty): the user_id and property rules of ValidateEvent. A non-empty Name
// is an error with Field FieldEvent.
func ValidateUser(ev *Event) error {
	if err := ValidateUserID(ev.UserID); err != nil {
		return &RowError{Pos: ev.Pos, Field: FieldUserID, Msg: err.Error()}
	}
	if ev.Name != "" {
		return &RowError{Pos: ev.Pos, Field: FieldEvent, Msg: "a user-property row has no event name"}
	}
	return checkProps(ev)
}

// checkProps checks property names and their uniqueness; quadratic in the
// number of properties, which is small, and allocation-free.
func checkProps(ev *Event) error {
	for i := range ev.Props {
		name := ev.Props[i].Name
		if err := ValidatePropName(name); err != nil {
			return &RowError{Pos: ev.Pos, Field: name, Msg: err.Error()}
		}
		for j := range i {
			if ev.Props[j].Name == name {
				return &RowError{Pos: ev.Pos, Field: name, Msg: "property given twice"}
			}
		}
	}
	return nil
}
