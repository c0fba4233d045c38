//! Channel versions in LangGraph's string form, and the reserved channels.

use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::{Error, Result};

/// A channel version: `{counter:032}.{random:016}` as LangGraph writes it.
///
/// Only the counter is ever parsed; the random suffix keeps two forks of one parent from
/// colliding on the same blob key. Plain integers (`"3"`, or a JSON number) are accepted as
/// versions written by older savers. Ordering compares the counter first, then the text.
/// Shared text: a clone (every checkpoint copies the thread's versions) allocates nothing.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ChannelVersion(Arc<str>);

impl ChannelVersion {
    /// Wraps a version string as stored.
    pub fn new(text: impl Into<String>) -> Self {
        ChannelVersion(text.into().into())
    }

    /// The version as stored.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The integer counter before the first `.`, if the version has one.
    pub fn counter(&self) -> Option<u64> {
        let head = self.0.split('.').next().unwrap_or("");
        head.parse().ok()
    }

    /// The version after `current` (none means the first version).
    pub fn next(current: Option<&ChannelVersion>) -> Result<ChannelVersion> {
        let counter = match current {
            None => 0,
            Some(v) => v.counter().ok_or_else(|| {
                Error::InvalidConfig(format!("channel version `{}` has no counter", v.0))
            })?,
        };
        let suffix: f64 = rand::random();
        let text = format!("{:032}.{:016}", counter + 1, suffix);
        Ok(ChannelVersion(text.into()))
    }
}

impl Ord for ChannelVersion {
    fn cmp(&self, other: &Self) -> Ordering {
        self.counter()
            .cmp(&other.counter())
            .then_with(|| self.0.cmp(&other.0))
    }
}

impl PartialOrd for ChannelVersion {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Debug for ChannelVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for ChannelVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for ChannelVersion {
    fn from(s: &str) -> Self {
        ChannelVersion(s.into())
    }
}

impl From<String> for ChannelVersion {
    fn from(s: String) -> Self {
        ChannelVersion(s.into())
    }
}

impl From<u64> for ChannelVersion {
    fn from(n: u64) -> Self {
        ChannelVersion(n.to_string().into())
    }
}

impl Serialize for ChannelVersion {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for ChannelVersion {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = ChannelVersion;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a channel version (string or integer)")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<ChannelVersion, E> {
                Ok(ChannelVersion(v.into()))
            }
            fn visit_string<E: serde::de::Error>(self, v: String) -> Result<ChannelVersion, E> {
                Ok(ChannelVersion(v.into()))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<ChannelVersion, E> {
                Ok(ChannelVersion(v.to_string().into()))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<ChannelVersion, E> {
                Ok(ChannelVersion(v.to_string().into()))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<ChannelVersion, E> {
                Ok(ChannelVersion(v.to_string().into()))
            }
        }
        // Self-describing formats may hold integer versions written by older savers;
        // binary formats only ever hold the string form.
        if d.is_human_readable() {
            d.deserialize_any(V)
        } else {
            d.deserialize_string(V)
        }
    }
}

/// Reserved channel names and the fixed write indexes LangGraph gives them.
pub mod channels {
    /// A task failed; its error is written here.
    pub const ERROR: &str = "__error__";
    /// A task was scheduled (used by the runtime for deferred work).
    pub const SCHEDULED: &str = "__scheduled__";
    /// A task paused with `interrupt()`.
    pub const INTERRUPT: &str = "__interrupt__";
    /// Values supplied by `Command::resume`.
    pub const RESUME: &str = "__resume__";
    /// Pending `Send` packets for the next super-step.
    pub const TASKS: &str = "__pregel_tasks";
    /// Task id for writes that no task produced (resume values, `update_state`).
    pub const NULL_TASK_ID: &str = "00000000-0000-0000-0000-000000000000";

    /// The fixed write index of a reserved channel, if `channel` is one.
    pub fn special_index(channel: &str) -> Option<i64> {
        match channel {
            ERROR => Some(-1),
            SCHEDULED => Some(-2),
            INTERRUPT => Some(-3),
            RESUME => Some(-4),
            _ => None,
        }
    }

    /// The index of the `position`-th write of a task to `channel`.
    pub fn write_index(channel: &str, position: usize) -> i64 {
        special_index(channel).unwrap_or(position as i64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_version_has_langgraph_shape() {
        let v1 = ChannelVersion::next(None).unwrap();
        assert_eq!(v1.counter(), Some(1));
        assert!(
            v1.as_str()
                .starts_with("00000000000000000000000000000001.0.")
        );
        let v2 = ChannelVersion::next(Some(&v1)).unwrap();
        assert_eq!(v2.counter(), Some(2));
        assert!(v1 < v2);
        assert!(ChannelVersion::from(9u64) < v2.clone().max(ChannelVersion::from(10u64)));
    }

    #[test]
    fn garbage_version_is_an_error_not_a_panic() {
        let bad = ChannelVersion::from("abc");
        assert!(matches!(
            ChannelVersion::next(Some(&bad)),
            Err(Error::InvalidConfig(_))
        ));
    }

    #[test]
    fn reserved_indexes() {
        assert_eq!(channels::write_index("__error__", 3), -1);
        assert_eq!(channels::write_index("__resume__", 0), -4);
        assert_eq!(channels::write_index("messages", 2), 2);
    }
}
