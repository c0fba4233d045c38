//! Channel versions in LangGraph's string form, and the reserved channels.

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::{Error, Result};

/// A channel version: `{counter:032}.{random:016}` as LangGraph writes it.
///
/// Only the counter is read for order; the random suffix keeps two forks of one parent from
/// colliding on the same blob key. Plain integers (`"3"`, or a JSON number) are accepted as
/// versions written by older savers. Ordering compares the counter first, then the text.
/// Shared text: a clone (every checkpoint copies the thread's versions) allocates nothing.
/// A version made by [`ChannelVersion::next`] or [`ChannelVersion::from_parts`] also keeps
/// its counter and suffix, so encoding it and reading its counter parse nothing.
#[derive(Clone)]
pub struct ChannelVersion(Arc<Inner>);

/// A version's text, with its parts when they are known to render as that text (the text
/// of a version made from its parts is rendered when first asked for).
struct Inner {
    parts: Option<(u64, Option<f64>)>,
    text: OnceLock<String>,
}

impl ChannelVersion {
    /// Wraps a version string as stored.
    pub fn new(text: impl Into<String>) -> Self {
        ChannelVersion(Arc::new(Inner {
            parts: None,
            text: OnceLock::from(text.into()),
        }))
    }

    /// The version with this counter and suffix: `{counter:032}.{suffix:016}`, or the bare
    /// counter without a suffix.
    pub fn from_parts(counter: u64, suffix: Option<f64>) -> Self {
        if suffix.is_some_and(|s| !s.is_finite()) {
            // A non-finite suffix does not read back from its text: keep the text alone.
            return ChannelVersion::new(render(counter, suffix));
        }
        ChannelVersion(Arc::new(Inner {
            parts: Some((counter, suffix)),
            text: OnceLock::new(),
        }))
    }

    /// The version as stored.
    pub fn as_str(&self) -> &str {
        self.0.text.get_or_init(|| match self.0.parts {
            Some((counter, suffix)) => render(counter, suffix),
            None => String::new(),
        })
    }

    /// The counter and suffix this version was made from, when it was made from them
    /// (`from_parts`, `next`): its text is exactly their rendering.
    pub fn known_parts(&self) -> Option<(u64, Option<f64>)> {
        self.0.parts
    }

    /// The integer counter before the first `.`, if the version has one.
    pub fn counter(&self) -> Option<u64> {
        if let Some((counter, _)) = self.0.parts {
            return Some(counter);
        }
        let head = self.as_str().split('.').next().unwrap_or("");
        head.parse().ok()
    }

    /// The version after `current` (none means the first version).
    pub fn next(current: Option<&ChannelVersion>) -> Result<ChannelVersion> {
        let counter = match current {
            None => 0,
            Some(v) => v.counter().ok_or_else(|| {
                Error::InvalidConfig(format!("channel version `{v}` has no counter"))
            })?,
        };
        Ok(ChannelVersion::from_parts(
            counter + 1,
            Some(rand::random::<f64>()),
        ))
    }
}

/// `{counter:032}.{suffix:016}`, or the bare counter without a suffix.
fn render(counter: u64, suffix: Option<f64>) -> String {
    use std::fmt::Write;
    // 32 digits, the dot, and a suffix of up to 19 characters fit without growing.
    let mut text = String::with_capacity(56);
    let _ = match suffix {
        Some(s) => write!(text, "{counter:032}.{s:016}"),
        None => write!(text, "{counter}"),
    };
    text
}

impl PartialEq for ChannelVersion {
    fn eq(&self, other: &Self) -> bool {
        if Arc::ptr_eq(&self.0, &other.0) {
            return true;
        }
        match (self.0.parts, other.0.parts) {
            // Distinct finite parts render distinct texts (shortest round-trip `f64` text).
            (Some((c1, s1)), Some((c2, s2))) => {
                c1 == c2 && s1.map(f64::to_bits) == s2.map(f64::to_bits)
            }
            _ => self.as_str() == other.as_str(),
        }
    }
}

impl Eq for ChannelVersion {}

impl Hash for ChannelVersion {
    /// Hashes the counter and the suffix's value, read from the text when the version was
    /// not made from its parts: equal texts read the same, and a text equal to the rendering
    /// of parts reads back exactly those parts. Forks of one parent share the counter and
    /// differ in the suffix alone; a thread forked thousands of times from one checkpoint
    /// must not put all their versions in one bucket.
    fn hash<H: Hasher>(&self, state: &mut H) {
        let (counter, suffix) = match self.0.parts {
            Some((counter, suffix)) => (Some(counter), suffix.map(f64::to_bits)),
            None => match self.as_str().split_once('.') {
                Some((head, tail)) => (
                    head.parse().ok(),
                    tail.parse::<f64>().ok().map(f64::to_bits),
                ),
                None => (self.as_str().parse().ok(), None),
            },
        };
        counter.hash(state);
        suffix.hash(state);
    }
}

impl Ord for ChannelVersion {
    fn cmp(&self, other: &Self) -> Ordering {
        self.counter()
            .cmp(&other.counter())
            .then_with(|| self.as_str().cmp(other.as_str()))
    }
}

impl PartialOrd for ChannelVersion {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Debug for ChannelVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for ChannelVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<&str> for ChannelVersion {
    fn from(s: &str) -> Self {
        ChannelVersion::new(s)
    }
}

impl From<String> for ChannelVersion {
    fn from(s: String) -> Self {
        ChannelVersion::new(s)
    }
}

impl From<u64> for ChannelVersion {
    fn from(n: u64) -> Self {
        ChannelVersion::new(n.to_string())
    }
}

impl Serialize for ChannelVersion {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
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
                Ok(ChannelVersion::new(v))
            }
            fn visit_string<E: serde::de::Error>(self, v: String) -> Result<ChannelVersion, E> {
                Ok(ChannelVersion::new(v))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<ChannelVersion, E> {
                Ok(ChannelVersion::new(v.to_string()))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<ChannelVersion, E> {
                Ok(ChannelVersion::new(v.to_string()))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<ChannelVersion, E> {
                Ok(ChannelVersion::new(v.to_string()))
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
    /// The input channel, which is also the START node's trigger.
    pub const START: &str = "__start__";
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
    fn a_version_from_parts_is_its_text() {
        use std::collections::HashSet;
        use std::collections::hash_map::DefaultHasher;
        let hash = |v: &ChannelVersion| {
            let mut h = DefaultHasher::new();
            v.hash(&mut h);
            h.finish()
        };
        for (counter, suffix) in [
            (7, Some(0.25)),
            (7, Some(0.5)),
            (3, None),
            (2, Some(-0.0)),
            (2, Some(-0.5)),
            (9, Some(1e20)),
            (9, Some(0.548_813_503_927_324_8)),
        ] {
            let parts = ChannelVersion::from_parts(counter, suffix);
            let text = ChannelVersion::new(parts.as_str());
            assert_eq!(parts, text);
            assert_eq!(text, ChannelVersion::from_parts(counter, suffix));
            assert_eq!(hash(&parts), hash(&text));
            assert_eq!(parts.cmp(&text), Ordering::Equal);
            assert_eq!(parts.counter(), Some(counter));
            assert_eq!(parts.known_parts(), Some((counter, suffix)));
        }
        assert_eq!(
            ChannelVersion::from_parts(7, Some(0.25)).as_str(),
            "00000000000000000000000000000007.0000000000000.25"
        );
        assert_ne!(
            ChannelVersion::from_parts(7, Some(0.25)),
            ChannelVersion::from_parts(7, Some(0.5))
        );
        // Forks of one parent (one counter) spread over a hash map's buckets.
        let forks: HashSet<u64> = (0..100)
            .map(|i| {
                hash(&ChannelVersion::new(
                    ChannelVersion::from_parts(7, Some(f64::from(i) / 100.0)).as_str(),
                ))
            })
            .collect();
        assert_eq!(forks.len(), 100);
        assert_ne!(
            ChannelVersion::from_parts(0, Some(0.0)),
            ChannelVersion::from_parts(0, Some(-0.0))
        );
        let nan = ChannelVersion::from_parts(1, Some(f64::NAN));
        assert_eq!(nan.known_parts(), None);
        assert_eq!(nan, ChannelVersion::new(nan.as_str()));
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
