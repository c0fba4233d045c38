//! How the loop's channel values and writes are stored: encoding, sealing and opening
//! values, the control writes that say what happened to a task, and LangGraph's stored
//! shapes of a pending `Send`.

use waypoint_checkpoint::{
    ChannelVersion, ChannelVersions, Serde, SerializedValue, Slot, channels, serde::TAG_NULL,
};

use crate::error::Result;

/// The write of a task that finished without writing anything.
pub(crate) const NO_WRITES: &str = "__no_writes__";
/// A control write of LangGraph (the node of a failed task with an error handler): it does
/// not make the task finished.
const ERROR_SOURCE_NODE: &str = "__error_source_node__";

/// Whether a write only says what happened to a task (failed, paused, answered) rather than
/// what it produced: a task with no other write has not finished.
pub(crate) fn is_control(channel: &str) -> bool {
    channels::special_index(channel).is_some() || channel == ERROR_SOURCE_NODE
}

/// A pending `Send` to store: LangGraph's `Send(node, arg)` when writing LangGraph's encoding
/// (`lc: 2`, ext 1, args `[node, arg]`), a `(node, arg)` pair otherwise.
pub(crate) struct SendRef<'a, S>(pub(crate) &'a str, pub(crate) &'a S);

impl<S: serde::Serialize> serde::Serialize for SendRef<'_, S> {
    fn serialize<Z: serde::Serializer>(
        &self,
        serializer: Z,
    ) -> std::result::Result<Z::Ok, Z::Error> {
        use serde::ser::{SerializeMap, SerializeTuple};
        if waypoint_checkpoint::serde::writing_langgraph() {
            let mut map = serializer.serialize_map(Some(7))?;
            map.serialize_entry("lc", &2)?;
            map.serialize_entry("type", "constructor")?;
            map.serialize_entry("id", &["langgraph", "types", "Send"])?;
            map.serialize_entry("ext", &1)?;
            map.serialize_entry("method", &())?;
            map.serialize_entry("args", &(self.0, self.1))?;
            map.serialize_entry("kwargs", &serde_json::Map::new())?;
            map.end()
        } else {
            let mut tuple = serializer.serialize_tuple(2)?;
            tuple.serialize_element(self.0)?;
            tuple.serialize_element(self.1)?;
            tuple.end()
        }
    }
}

/// A stored pending `Send`: a `(node, arg)` pair, LangGraph's `Send` (its `lc: 2` map, or
/// its arguments `[node, arg]` or `[node, arg, timeout]`), or a `{node, arg}` map.
pub(crate) struct SendPacket<S>(pub(crate) String, pub(crate) S);

impl<'de, S: serde::Deserialize<'de>> serde::Deserialize<'de> for SendPacket<S> {
    fn deserialize<D: serde::Deserializer<'de>>(
        deserializer: D,
    ) -> std::result::Result<Self, D::Error> {
        if deserializer.is_human_readable() {
            deserializer.deserialize_any(SendVisitor(std::marker::PhantomData))
        } else {
            deserializer.deserialize_tuple(2, SendVisitor(std::marker::PhantomData))
        }
    }
}

struct SendVisitor<S>(std::marker::PhantomData<S>);

impl<'de, S: serde::Deserialize<'de>> serde::de::Visitor<'de> for SendVisitor<S> {
    type Value = SendPacket<S>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a Send: [node, arg] or LangGraph's langgraph.types.Send")
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(
        self,
        mut seq: A,
    ) -> std::result::Result<Self::Value, A::Error> {
        use serde::de::Error as _;
        let node: String = seq
            .next_element()?
            .ok_or_else(|| A::Error::invalid_length(0, &self))?;
        let arg: S = seq
            .next_element()?
            .ok_or_else(|| A::Error::invalid_length(1, &self))?;
        // LangGraph's third argument, a timeout policy, has no Waypoint counterpart.
        while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
        Ok(SendPacket(node, arg))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(
        self,
        mut map: A,
    ) -> std::result::Result<Self::Value, A::Error> {
        use serde::de::Error as _;
        let (mut node, mut arg, mut packet, mut args_seen) = (None, None, None, false);
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "id" => {
                    let id: Vec<String> = map.next_value()?;
                    if id.last().map(String::as_str) != Some("Send") {
                        return Err(A::Error::custom(format!(
                            "expected langgraph.types.Send, found {}",
                            id.join(".")
                        )));
                    }
                }
                "args" => {
                    args_seen = true;
                    packet = map.next_value_seed(SendArgs(std::marker::PhantomData))?;
                }
                "node" => node = Some(map.next_value::<String>()?),
                "arg" => arg = Some(map.next_value::<S>()?),
                _ => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
        }
        match (packet, node, arg) {
            (Some(packet), _, _) => Ok(packet),
            (None, Some(node), Some(arg)) if !args_seen => Ok(SendPacket(node, arg)),
            _ => Err(A::Error::custom(
                "a Send needs a node and an arg: [node, arg] or {node, arg}",
            )),
        }
    }
}

/// The `args` of an `lc: 2` map: `[node, arg, ...]` for a `Send`, `None` for anything that
/// does not start with a node name (the map's `id` then says what it is).
struct ArgsVisitor<S>(std::marker::PhantomData<S>);

impl<'de, S: serde::Deserialize<'de>> serde::de::Visitor<'de> for ArgsVisitor<S> {
    type Value = Option<SendPacket<S>>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the arguments of a Send: [node, arg]")
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(
        self,
        mut seq: A,
    ) -> std::result::Result<Self::Value, A::Error> {
        let packet = match seq.next_element::<NodeName>()? {
            Some(NodeName(Some(node))) => seq.next_element::<S>()?.map(|arg| SendPacket(node, arg)),
            _ => None,
        };
        while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
        Ok(packet)
    }
}

/// A string, or `None` for any other value.
struct NodeName(Option<String>);

impl<'de> serde::Deserialize<'de> for NodeName {
    fn deserialize<D: serde::Deserializer<'de>>(
        deserializer: D,
    ) -> std::result::Result<Self, D::Error> {
        struct Name;
        impl<'de> serde::de::Visitor<'de> for Name {
            type Value = NodeName;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("any value")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> std::result::Result<NodeName, E> {
                Ok(NodeName(Some(v.to_owned())))
            }
            fn visit_bool<E>(self, _: bool) -> std::result::Result<NodeName, E> {
                Ok(NodeName(None))
            }
            fn visit_i64<E>(self, _: i64) -> std::result::Result<NodeName, E> {
                Ok(NodeName(None))
            }
            fn visit_u64<E>(self, _: u64) -> std::result::Result<NodeName, E> {
                Ok(NodeName(None))
            }
            fn visit_f64<E>(self, _: f64) -> std::result::Result<NodeName, E> {
                Ok(NodeName(None))
            }
            fn visit_unit<E>(self) -> std::result::Result<NodeName, E> {
                Ok(NodeName(None))
            }
            fn visit_none<E>(self) -> std::result::Result<NodeName, E> {
                Ok(NodeName(None))
            }
            fn visit_bytes<E>(self, _: &[u8]) -> std::result::Result<NodeName, E> {
                Ok(NodeName(None))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> std::result::Result<NodeName, A::Error> {
                while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(NodeName(None))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<NodeName, A::Error> {
                while map
                    .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
                    .is_some()
                {}
                Ok(NodeName(None))
            }
        }
        deserializer.deserialize_any(Name)
    }
}

/// The `args` of LangGraph's `Send`, read with the deserializer that holds them.
struct SendArgs<S>(std::marker::PhantomData<S>);

impl<'de, S: serde::Deserialize<'de>> serde::de::DeserializeSeed<'de> for SendArgs<S> {
    type Value = Option<SendPacket<S>>;

    fn deserialize<D: serde::Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> std::result::Result<Self::Value, D::Error> {
        deserializer.deserialize_seq(ArgsVisitor(std::marker::PhantomData))
    }
}

/// Where a channel value at its current version is stored (what sealing binds it to).
pub(crate) fn channel_slot<'a>(
    thread: &'a str,
    ns: &'a str,
    channel: &'a str,
    versions: &'a ChannelVersions,
) -> Slot<'a> {
    Slot::Channel {
        thread_id: thread,
        checkpoint_ns: ns,
        channel,
        version: versions
            .get(channel)
            .map(ChannelVersion::as_str)
            .unwrap_or(""),
    }
}

/// Seals a channel value for its slot at its current version; without a keyring the value
/// is kept as it is, and no slot (nor the version's text) is made.
pub(crate) fn seal_channel(
    serde: &Serde,
    value: SerializedValue,
    (thread, ns, channel): (&str, &str, &str),
    versions: &ChannelVersions,
) -> Result<SerializedValue> {
    if !serde.is_encrypted() {
        return Ok(value);
    }
    let slot = channel_slot(thread, ns, channel, versions);
    serde
        .seal(&value, &slot)
        .map_err(|e| crate::state::channel_error(channel, e))
}

/// Encodes one write.
pub(crate) fn dump<T: serde::Serialize + ?Sized>(
    serde: &Serde,
    channel: &str,
    value: &T,
) -> Result<(String, SerializedValue)> {
    serde
        .dumps(value)
        .map(|v| (channel.to_owned(), v))
        .map_err(|e| crate::state::channel_error(channel, e))
}

/// The value of a trigger channel and of a write that carries none.
pub(crate) fn null_value() -> SerializedValue {
    SerializedValue::new(TAG_NULL, Vec::new())
}

/// Opens a sealed value (a no-op for values that are not sealed).
pub(crate) fn open(
    serde: &Serde,
    value: &SerializedValue,
    slot: &Slot<'_>,
    channel: &str,
) -> Result<SerializedValue> {
    serde
        .open(value, slot)
        .map_err(|e| crate::state::channel_error(channel, e))
}

/// Decodes one value of `channel`.
pub(crate) fn decode<T: serde::de::DeserializeOwned>(
    serde: &Serde,
    value: &SerializedValue,
    channel: &str,
) -> Result<T> {
    serde
        .loads(value)
        .map_err(|e| crate::state::channel_error(channel, e))
}
