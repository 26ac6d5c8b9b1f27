package storage

import (
	"errors"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/internal/userfold"
)

// The live ingestion contract between the events endpoint (package
// server, POST /api/apps/{app}/events) and the store's write path
// (docs/ingest.md §1–§3). The endpoint parses and checks the shape of each
// event (user id, event name, timestamp, insert id, property names and
// value sizes) and hands the good ones of a request to
//
//	(*Store).Ingest(ctx, app string, evs []event.Event, users []UserWrite) (*IngestReport, error)
//
// which coerces them to the app's schema (a property's first sighting
// fixes its type; int widens to float), rejects per event what does not
// fit, and returns only after every accepted event is durable (write-ahead
// log fsynced, group commit) and visible to queries, creating the app when
// missing. The types below are the shapes of that call.

// UserWrite is a write of user properties carried by an event
// (docs/ingest.md §1): the user and time are those of the event evs[Index].
// A user's properties are the fold of its writes in (timestamp,
// arrival) order (docs/identity.md §3, internal/userfold): without Once
// (user_properties) a write replaces (SetEvent: the latest wins); with
// Once (user_properties_once) it sets a property only where the user
// has none at its timestamp (SetOnceEvent: without unsets, the earliest
// write wins), also for back-filled events. Props' names are
// valid property names (event.ValidatePropName), not repeated; values
// are untyped JSON values as the event's properties are (string, int,
// float, bool; arrays and objects as JSON text).
//
// Op says what the write does (docs/identity.md §3); Once with Op
// UserSet is UserSetOnce (the older spelling). UserUnset clears the
// properties named in Props (their values are ignored; a property no
// user of the app has ever had is skipped: there is nothing to clear);
// UserAdd adds Props' numbers (int or float values) to the properties,
// from 0 when unset — a value of another type, or a property the app
// types other than int or float, fails as a bad value does;
// UserDelete clears every property of the user (Props is ignored).
type UserWrite struct {
	Index int
	Props []event.Prop
	Once  bool
	Op    UserOp
}

// UserOp is the operation of a UserWrite: userfold's numbering, which is
// also the live record's.
type UserOp = userfold.Op

// The operations of a UserWrite.
const (
	UserSet     = userfold.Set     // replaces the value
	UserSetOnce = userfold.SetOnce // sets the value if unset at the write's time
	UserUnset   = userfold.Unset   // clears the value
	UserAdd     = userfold.Add     // adds a number (from 0 when unset)
	UserDelete  = userfold.Delete  // clears every property of the user
)

// op returns the write's operation, Once folded in.
func (u *UserWrite) op() UserOp {
	if u.Op == UserSet && u.Once {
		return UserSetOnce
	}
	return u.Op
}

// userOpEvents are the users-row event names of the operations.
var userOpEvents = [...]string{UserSet: SetEvent, UserSetOnce: SetOnceEvent, UserUnset: UnsetEvent, UserAdd: AddEvent, UserDelete: DeleteEvent}

// IngestReport is what an Ingest stored. Accepted counts the events
// stored; Rejected lists, in Index order, those refused by the app's
// schema: their user writes are not applied either (a bad value anywhere
// in an event rejects the whole event).
type IngestReport struct {
	Accepted int
	Rejected []IngestRejection
	// Dropped lists, in Index order, the properties removed from accepted
	// events under IngestOptions.DropBadValues (Field the property's path,
	// Message why); nil without it.
	Dropped []IngestRejection
	// Suppressed counts the events dropped, unstored and not rejected,
	// because an erasure request with suppress names their distinct id
	// (docs/storage.md §7); they are not in Accepted.
	Suppressed int
}

// IngestOptions changes how Store.IngestWith treats a request's events.
// The zero value is Ingest's behaviour.
type IngestOptions struct {
	// DropBadValues removes from an event each property (and user
	// property) whose name or value does not fit the app's schema, and
	// stores the event without it, instead of rejecting the event
	// (docs/ingest.md §6, the SDK capture paths). An event still fails
	// whole on its user id, event name, timestamp or identity operation.
	DropBadValues bool
	// ExplicitOps says the request's identity operations are all in its
	// IdentityWrites: events named $identify, $create_alias or
	// $merge_dangerously carry none (OpOfEvent is not applied). The SDK
	// capture paths decode each protocol's operations themselves
	// (package capture).
	ExplicitOps bool
}

// IngestRejection is one event refused by Ingest: Index into its evs,
// Field the JSON path of the bad value in docs/ingest.md §1's event shape
// ("properties.price", "user_properties.plan",
// "user_properties_once.first_seen") and Message what was expected and
// found ("want int, found \"abc\"").
type IngestRejection struct {
	Index   int
	Field   string
	Message string
}

// ErrBackpressure is matched (errors.Is) by the error of an Ingest
// refused because the memory of unflushed events is over its limit
// (--ingest-memory, docs/ingest.md §2): nothing of the request was stored; the
// client retries after Retry-After.
var ErrBackpressure = errors.New("ingest backpressure: unflushed events are over their memory limit")

// ErrDiskFull is matched (errors.Is) by the error of an Ingest refused
// because the disk holding the write-ahead log is full: nothing of the
// request was stored.
var ErrDiskFull = errors.New("disk full")
