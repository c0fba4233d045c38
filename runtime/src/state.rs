//! Graph state: a set of channels, each with a reducer that folds updates into it.
//!
//! A state type is usually a struct deriving [`State`](macro@crate::State): each field is a
//! channel, `#[reducer(...)]` names how updates combine with it, and fields without one keep
//! the last value written. The derive also makes the partial update type (one `Option` per
//! field). [`JsonState`] is the dynamic form: a JSON object whose keys and reducers are
//! declared at run time in a [`JsonSchema`].
//!
//! The runtime never looks inside values: it moves channels to and from the checkpointer
//! through the methods below, by channel index.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::fmt::{self, Debug};
use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use waypoint_checkpoint::{Serde, SerializedValue};

use crate::error::{Error, Result};
use crate::messages::{Message, MessagesFormat, add_messages_as};

/// One channel of a state: its name and whether a reducer combines its writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChannelSpec {
    /// The channel (field or key) name.
    pub name: Cow<'static, str>,
    /// Whether writes are folded by a reducer; last-value channels take one write per step.
    pub reduced: bool,
    /// Whether the reducer only appends (`append`, `add_messages`): the value is then the
    /// fold of its writes, so checkpoints store the writes, not the value (see
    /// [`crate::DeltaPolicy`]).
    pub appending: bool,
    /// Whether the reducer is a plain append (`append`): the value is its items followed by
    /// each write's, so a load may join their encoded items and decode once.
    pub concatenates: bool,
}

impl ChannelSpec {
    /// A channel spec usable in `const` tables (what the derive generates).
    pub const fn new(name: &'static str, reduced: bool) -> Self {
        ChannelSpec {
            name: Cow::Borrowed(name),
            reduced,
            appending: false,
            concatenates: false,
        }
    }

    /// A channel whose reducer only appends.
    pub const fn appending(name: &'static str) -> Self {
        ChannelSpec {
            name: Cow::Borrowed(name),
            reduced: true,
            appending: true,
            concatenates: false,
        }
    }

    /// A channel whose reducer is a plain append (`append`).
    pub const fn concatenating(name: &'static str) -> Self {
        ChannelSpec {
            name: Cow::Borrowed(name),
            reduced: true,
            appending: true,
            concatenates: true,
        }
    }
}

/// A graph's state: channels the runtime reads, updates through reducers and checkpoints.
///
/// Implemented by `#[derive(State)]` and by [`JsonState`]. Channel indices are positions in
/// [`State::channels`]. Every method that decodes returns an error on bad bytes, never panics.
pub trait State: Clone + Debug + Send + Sync + Serialize + DeserializeOwned + 'static {
    /// A partial update: a value for some channels, folded in by their reducers.
    type Update: Clone + Debug + Default + Send + Sync + Serialize + DeserializeOwned + 'static;

    /// The channels, in declaration order.
    fn channels(&self) -> &[ChannelSpec];

    /// Encodes one channel's current value; `None` when the channel holds nothing yet.
    fn dump_channel(&self, channel: usize, serde: &Serde) -> Result<Option<SerializedValue>>;

    /// Replaces one channel's value with a stored one.
    fn load_channel(
        &mut self,
        channel: usize,
        value: &SerializedValue,
        serde: &Serde,
    ) -> Result<()>;

    /// Encodes the channels an update writes, as `(channel, value)` pairs in channel order.
    fn dump_update(
        &self,
        update: &Self::Update,
        serde: &Serde,
    ) -> Result<Vec<(usize, SerializedValue)>>;

    /// Sets one channel of `update` from a stored write (the inverse of [`State::dump_update`]).
    fn load_write(
        &self,
        update: &mut Self::Update,
        channel: usize,
        value: &SerializedValue,
        serde: &Serde,
    ) -> Result<()>;

    /// The channels `update` writes, in channel order.
    fn written(&self, update: &Self::Update) -> Vec<usize>;

    /// Folds `update` into the state through each channel's reducer.
    fn apply(&mut self, update: Self::Update) -> Result<()>;

    /// Sets one channel to `from`'s value of it (the derive clones the field).
    fn copy_channel(&mut self, from: &Self, channel: usize, serde: &Serde) -> Result<()> {
        if let Some(value) = from.dump_channel(channel, serde)? {
            self.load_channel(channel, &value, serde)?;
        }
        Ok(())
    }

    /// The index of the channel called `name`.
    fn channel_index(&self, name: &str) -> Option<usize> {
        self.channels().iter().position(|c| c.name == name)
    }

    /// Whether a run's input may write `channel` (LangGraph's input schema); every channel
    /// unless the state narrows it, as [`JsonSchema::input_keys`] does.
    fn is_input(&self, _channel: usize) -> bool {
        true
    }

    /// Whether `invoke` returns `channel` (LangGraph's output schema); every channel unless
    /// the state narrows it, as [`JsonSchema::output_keys`] does.
    fn is_output(&self, _channel: usize) -> bool {
        true
    }

    /// The state as `invoke` and the `values` stream return it: only its output channels.
    /// `None` when that is the whole state, as for every typed state.
    fn output(&self) -> Option<Self> {
        None
    }
}

/// Whether a step that changed the channels `changed` shows in the `values` stream: always,
/// unless the state narrows its output channels; then when it changed one of them, as in
/// LangGraph.
pub(crate) fn shows_output<S: State>(state: &S, changed: &BTreeSet<String>) -> bool {
    let narrowed = (0..state.channels().len()).any(|i| !state.is_output(i));
    !narrowed
        || changed.iter().any(|name| {
            state
                .channel_index(name)
                .is_some_and(|i| state.is_output(i))
        })
}

/// Checks that a run's `input` writes only the state's input channels.
pub(crate) fn check_input<S: State>(state: &S, input: &S::Update) -> Result<()> {
    let channels = state.channels();
    match state
        .written(input)
        .into_iter()
        .find(|&c| !state.is_input(c))
    {
        Some(c) => Err(Error::InvalidUpdate(format!(
            "`{}` is not an input key of this graph (its input keys: {})",
            channels[c].name,
            channels
                .iter()
                .enumerate()
                .filter(|(i, _)| state.is_input(*i))
                .map(|(_, c)| format!("`{}`", c.name))
                .collect::<Vec<_>>()
                .join(", ")
        ))),
        None => Ok(()),
    }
}

/// What a reducer function may return: nothing, or a `Result` to refuse an update.
pub trait ReducerOutput {
    /// The reducer's outcome as a runtime result.
    fn into_result(self) -> Result<()>;
}

impl ReducerOutput for () {
    fn into_result(self) -> Result<()> {
        Ok(())
    }
}

impl<E: Into<Error>> ReducerOutput for std::result::Result<(), E> {
    fn into_result(self) -> Result<()> {
        self.map_err(Into::into)
    }
}

/// Applies `reducer` to a channel: the call the derive generates for `#[reducer(f)]`.
pub fn reduce<T, R: ReducerOutput>(
    reducer: impl FnOnce(&mut T, T) -> R,
    current: &mut T,
    update: T,
) -> Result<()> {
    reducer(current, update).into_result()
}

/// Built-in reducers, named in `#[reducer(...)]`.
pub mod reducers {
    /// Appends the update's items (LangGraph's `operator.add` on lists).
    pub fn append<T>(current: &mut Vec<T>, update: Vec<T>) {
        current.extend(update);
    }

    pub use crate::messages::add_messages;
}

/// Maps a codec error of channel `name` to the runtime's error.
pub fn channel_error(name: &str, error: waypoint_checkpoint::Error) -> Error {
    Error::Serialization {
        channel: name.to_owned(),
        source: error,
    }
}

/// A reducer of a [`JsonState`] key.
pub type JsonReducer = Arc<dyn Fn(&mut Value, Value) -> Result<()> + Send + Sync>;

/// How a reduced [`JsonState`] key folds its updates.
#[derive(Clone)]
struct Fold {
    reducer: JsonReducer,
    /// The value the key starts with.
    initial: Value,
    /// What the reducer is (`append`, `add_messages(..)`, `custom`), for clash errors.
    kind: String,
}

impl Fold {
    /// Whether `self` and `other` fold alike: the same built-in, or the same custom function.
    fn same_as(&self, other: &Fold) -> bool {
        self.kind == other.kind
            && self.initial == other.initial
            && (self.kind != CUSTOM || Arc::ptr_eq(&self.reducer, &other.reducer))
    }
}

/// The kind of a reducer given as a function.
const CUSTOM: &str = "custom";

/// The declared keys of a [`JsonState`], their reducers, and which keys a run takes as
/// input and returns as output (LangGraph's input, output and private schemas).
///
/// Every key is a channel nodes may read and write. By default a run's input may write
/// every key and `invoke` returns every key; [`JsonSchema::input_keys`] and
/// [`JsonSchema::output_keys`] narrow that, and keys in neither are private to the nodes.
/// Checkpoints store every key either way.
#[derive(Clone, Default)]
pub struct JsonSchema {
    channels: Vec<ChannelSpec>,
    // Per channel: how a reduced channel folds its updates.
    reducers: Vec<Option<Fold>>,
    // The keys a run's input may write, and those a run returns; `None` for every key.
    input: Option<Vec<String>>,
    output: Option<Vec<String>>,
}

impl Debug for JsonSchema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(&self.channels).finish()
    }
}

impl JsonSchema {
    /// An empty schema.
    pub fn new() -> Self {
        JsonSchema::default()
    }

    /// Declares a last-value key.
    pub fn last_value(mut self, name: impl Into<String>) -> Self {
        self.push(name.into(), None);
        self
    }

    /// Declares a list key whose updates are appended (LangGraph's `Annotated[list, add]`).
    pub fn append(self, name: impl Into<String>) -> Self {
        let name = name.into();
        let append = |current: &mut Value, update| {
            match (current, update) {
                (Value::Array(items), Value::Array(more)) => items.extend(more),
                (Value::Array(items), one) => items.push(one),
                (current, _) => {
                    return Err(Error::InvalidUpdate(format!(
                        "cannot append to a non-list value {current}"
                    )));
                }
            }
            Ok(())
        };
        let mut schema = self.fold(name.clone(), Value::Array(Vec::new()), "append", append);
        if let Some(spec) = schema.channels.iter_mut().find(|c| c.name == name) {
            spec.appending = true;
            spec.concatenates = true;
        }
        schema
    }

    /// Declares a list of messages folded by [`add_messages`](crate::add_messages)
    /// (LangGraph's `Annotated[list, add_messages]`): updates by id replace, append or
    /// remove, as for a typed state. See [`JsonSchema::messages_as`].
    pub fn messages(self, name: impl Into<String>) -> Self {
        self.messages_as(name, MessagesFormat::AsIs)
    }

    /// Declares a list of messages folded by [`add_messages_as`] in `format` (LangGraph's
    /// `Annotated[list, add_messages(format=...)]`).
    ///
    /// An update is a list of messages or one message, in any form
    /// [`Message::from_json`] reads: LangChain's dicts (`{"type": "human", ...}`), OpenAI's
    /// (`{"role": "user", ...}`), `[role, content]` pairs, bare strings (human messages).
    /// The key holds LangChain's dict form of each message. A value that is not a message
    /// is an error naming the key and its position, and the key keeps its value.
    pub fn messages_as(self, name: impl Into<String>, format: MessagesFormat) -> Self {
        let name = name.into();
        let key = name.clone();
        let kind = format!("add_messages({format:?})");
        let fold = move |current: &mut Value, update| {
            let mut messages = json_messages(&key, current.clone())?;
            add_messages_as(&mut messages, json_messages(&key, update)?, format)?;
            *current = Value::Array(messages.iter().map(Message::to_json).collect());
            Ok(())
        };
        self.fold(name, Value::Array(Vec::new()), kind, fold)
    }

    /// Declares a key folded by `reducer`, starting from `initial`.
    pub fn reducer(
        self,
        name: impl Into<String>,
        initial: Value,
        reducer: impl Fn(&mut Value, Value) -> Result<()> + Send + Sync + 'static,
    ) -> Self {
        self.fold(name.into(), initial, CUSTOM, reducer)
    }

    /// Declares a key folded by `reducer` of kind `kind`.
    fn fold(
        mut self,
        name: String,
        initial: Value,
        kind: impl Into<String>,
        reducer: impl Fn(&mut Value, Value) -> Result<()> + Send + Sync + 'static,
    ) -> Self {
        let fold = Fold {
            reducer: Arc::new(reducer),
            initial,
            kind: kind.into(),
        };
        self.push(name, Some(fold));
        self
    }

    /// Adds the keys of `other` (LangGraph's private schema, or the keys of an input or
    /// output schema): the union of both, keeping this schema's input and output keys.
    ///
    /// A key in both must fold alike: the same built-in reducer, or the same custom
    /// reducer (one `Arc`'d function); a last-value declaration defers to a reducer, as in
    /// LangGraph. Two different reducers for one key are an error naming the key.
    pub fn merge(mut self, other: JsonSchema) -> Result<Self> {
        for (spec, fold) in other.channels.into_iter().zip(other.reducers) {
            let Some(i) = self.channels.iter().position(|c| c.name == spec.name) else {
                self.channels.push(spec);
                self.reducers.push(fold);
                continue;
            };
            match (&self.reducers[i], fold) {
                (_, None) => {}
                (None, Some(fold)) => {
                    self.channels[i] = spec;
                    self.reducers[i] = Some(fold);
                }
                (Some(ours), Some(theirs)) if ours.same_as(&theirs) => {}
                (Some(ours), Some(theirs)) => {
                    return Err(Error::InvalidGraph(format!(
                        "key `{}` is declared twice with different reducers (`{}` and `{}`)",
                        spec.name, ours.kind, theirs.kind
                    )));
                }
            }
        }
        Ok(self)
    }

    /// Restricts a run's input to `keys` (LangGraph's input schema): an input writing
    /// another key is an error. Each must be a key of the schema.
    pub fn input_keys<I: IntoIterator<Item = T>, T: Into<String>>(
        mut self,
        keys: I,
    ) -> Result<Self> {
        self.input = Some(self.own_keys("input", keys)?);
        Ok(self)
    }

    /// Restricts what `invoke` and the `values` stream return to `keys` (LangGraph's
    /// output schema). Each must be a key of the schema.
    pub fn output_keys<I: IntoIterator<Item = T>, T: Into<String>>(
        mut self,
        keys: I,
    ) -> Result<Self> {
        self.output = Some(self.own_keys("output", keys)?);
        Ok(self)
    }

    /// Adds the keys of `schema` and makes them the input keys (LangGraph's `input_schema`).
    pub fn input(self, schema: JsonSchema) -> Result<Self> {
        let keys = schema.keys();
        self.merge(schema)?.input_keys(keys)
    }

    /// Adds the keys of `schema` and makes them the output keys (LangGraph's `output_schema`).
    pub fn output(self, schema: JsonSchema) -> Result<Self> {
        let keys = schema.keys();
        self.merge(schema)?.output_keys(keys)
    }

    /// The declared keys, in declaration order.
    pub fn keys(&self) -> Vec<String> {
        self.channels.iter().map(|c| c.name.to_string()).collect()
    }

    /// `keys` as input or output keys (`role`): each must be a key of the schema.
    fn own_keys<I: IntoIterator<Item = T>, T: Into<String>>(
        &self,
        role: &str,
        keys: I,
    ) -> Result<Vec<String>> {
        keys.into_iter()
            .map(Into::into)
            .map(|key| match self.channels.iter().any(|c| c.name == key) {
                true => Ok(key),
                false => Err(Error::InvalidGraph(format!(
                    "{role} key `{key}` is not a key of the schema (its keys: {})",
                    self.keys().join(", ")
                ))),
            })
            .collect()
    }

    fn push(&mut self, name: String, reducer: Option<Fold>) {
        // Re-declaring a key replaces it, so a schema never holds two channels of one name.
        if let Some(i) = self.channels.iter().position(|c| c.name == name) {
            self.channels.remove(i);
            self.reducers.remove(i);
        }
        self.channels.push(ChannelSpec {
            name: Cow::Owned(name),
            reduced: reducer.is_some(),
            appending: false,
            concatenates: false,
        });
        self.reducers.push(reducer);
    }
}

/// The messages of a JSON value of key `key`: a list of messages, or one message.
pub(crate) fn json_messages(key: &str, value: Value) -> Result<Vec<Message>> {
    let items = match value {
        Value::Array(items) => items,
        one => vec![one],
    };
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| {
            Message::from_json(item).map_err(|e| {
                Error::InvalidUpdate(format!("`{key}`: item {i} is not a message: {e}"))
            })
        })
        .collect()
}

/// A dynamic state: a JSON object whose keys and reducers a [`JsonSchema`] declares.
///
/// Reduced keys start at their initial value; last-value keys are absent until written,
/// as in LangGraph (the input checkpoint of `{foo, bar: append}` holds only `{"bar": []}`).
#[derive(Clone)]
pub struct JsonState {
    schema: Arc<JsonSchema>,
    values: Map<String, Value>,
}

impl Debug for JsonState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Debug::fmt(&self.values, f)
    }
}

impl PartialEq for JsonState {
    fn eq(&self, other: &Self) -> bool {
        self.values == other.values
    }
}

impl Default for JsonState {
    fn default() -> Self {
        JsonState::new(JsonSchema::new())
    }
}

impl JsonState {
    /// The empty state of `schema`: reduced keys at their initial values.
    pub fn new(schema: JsonSchema) -> Self {
        let schema = Arc::new(schema);
        let values = schema
            .channels
            .iter()
            .zip(&schema.reducers)
            .filter_map(|(c, r)| {
                r.as_ref()
                    .map(|fold| (c.name.to_string(), fold.initial.clone()))
            })
            .collect();
        JsonState { schema, values }
    }

    /// The current values.
    pub fn values(&self) -> &Map<String, Value> {
        &self.values
    }

    /// One value, if present.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.values.get(key)
    }

    /// The values as one JSON object.
    pub fn to_value(&self) -> Value {
        Value::Object(self.values.clone())
    }

    /// The same schema with `values` (unknown keys are an error).
    pub fn with_values(&self, values: Map<String, Value>) -> Result<Self> {
        let mut state = JsonState::new((*self.schema).clone());
        state.schema = Arc::clone(&self.schema);
        for key in values.keys() {
            self.index_of(key)?;
        }
        state.values.extend(values);
        Ok(state)
    }

    fn index_of(&self, key: &str) -> Result<usize> {
        self.channel_index(key).ok_or_else(|| {
            Error::InvalidUpdate(format!("`{key}` is not a key of this graph's state"))
        })
    }

    /// Whether `keys` (`None`: every key) holds `channel`'s name.
    fn listed(&self, keys: Option<&[String]>, channel: usize) -> bool {
        match (keys, self.name(channel)) {
            (Some(keys), Ok(name)) => keys.iter().any(|k| k == name),
            _ => true,
        }
    }

    fn name(&self, channel: usize) -> Result<&str> {
        self.schema
            .channels
            .get(channel)
            .map(|c| c.name.as_ref())
            .ok_or_else(|| Error::InvalidUpdate(format!("no channel {channel}")))
    }
}

impl Serialize for JsonState {
    fn serialize<Ser: serde::Serializer>(
        &self,
        s: Ser,
    ) -> std::result::Result<Ser::Ok, Ser::Error> {
        self.values.serialize(s)
    }
}

impl<'de> serde::Deserialize<'de> for JsonState {
    /// Values without a schema (every key last-value); used for `Send` arguments.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let values = Map::deserialize(d)?;
        let mut schema = JsonSchema::new();
        for key in values.keys() {
            schema = schema.last_value(key.clone());
        }
        Ok(JsonState {
            schema: Arc::new(schema),
            values,
        })
    }
}

impl State for JsonState {
    type Update = Map<String, Value>;

    fn channels(&self) -> &[ChannelSpec] {
        &self.schema.channels
    }

    fn dump_channel(&self, channel: usize, serde: &Serde) -> Result<Option<SerializedValue>> {
        let name = self.name(channel)?;
        match self.values.get(name) {
            Some(value) => Ok(Some(
                serde.dumps(value).map_err(|e| channel_error(name, e))?,
            )),
            None => Ok(None),
        }
    }

    fn load_channel(
        &mut self,
        channel: usize,
        value: &SerializedValue,
        serde: &Serde,
    ) -> Result<()> {
        let name = self.name(channel)?.to_owned();
        let value: Value = serde.loads(value).map_err(|e| channel_error(&name, e))?;
        self.values.insert(name, value);
        Ok(())
    }

    fn dump_update(
        &self,
        update: &Self::Update,
        serde: &Serde,
    ) -> Result<Vec<(usize, SerializedValue)>> {
        let mut out = Vec::with_capacity(update.len());
        for (key, value) in update {
            let value = serde.dumps(value).map_err(|e| channel_error(key, e))?;
            out.push((self.index_of(key)?, value));
        }
        out.sort_by_key(|(i, _)| *i);
        Ok(out)
    }

    fn load_write(
        &self,
        update: &mut Self::Update,
        channel: usize,
        value: &SerializedValue,
        serde: &Serde,
    ) -> Result<()> {
        let name = self.name(channel)?;
        let value: Value = serde.loads(value).map_err(|e| channel_error(name, e))?;
        update.insert(name.to_owned(), value);
        Ok(())
    }

    fn copy_channel(&mut self, from: &Self, channel: usize, _serde: &Serde) -> Result<()> {
        let name = self.name(channel)?.to_owned();
        match from.values.get(&name) {
            Some(value) => self.values.insert(name, value.clone()),
            None => self.values.remove(&name),
        };
        Ok(())
    }

    fn written(&self, update: &Self::Update) -> Vec<usize> {
        let mut out: Vec<usize> = update
            .keys()
            .filter_map(|k| self.channel_index(k))
            .collect();
        out.sort_unstable();
        out
    }

    fn is_input(&self, channel: usize) -> bool {
        self.listed(self.schema.input.as_deref(), channel)
    }

    fn is_output(&self, channel: usize) -> bool {
        self.listed(self.schema.output.as_deref(), channel)
    }

    fn output(&self) -> Option<Self> {
        let keys = self.schema.output.as_ref()?;
        let mut values = self.values.clone();
        values.retain(|key, _| keys.contains(key));
        Some(JsonState {
            schema: Arc::clone(&self.schema),
            values,
        })
    }

    fn apply(&mut self, update: Self::Update) -> Result<()> {
        // Check every key first, so a bad update changes nothing.
        for key in update.keys() {
            self.index_of(key)?;
        }
        let schema = Arc::clone(&self.schema);
        for (key, value) in update {
            let i = self.index_of(&key)?;
            match &schema.reducers[i] {
                Some(fold) => {
                    let current = self
                        .values
                        .entry(key)
                        .or_insert_with(|| fold.initial.clone());
                    (fold.reducer)(current, value)?;
                }
                None => {
                    self.values.insert(key, value);
                }
            }
        }
        Ok(())
    }
}

// Typed projections of a state (LangGraph's input, output and node input schemas for typed
// states): plain serde types whose fields name channels of the state.

/// The field names of struct type `T` as its `#[derive(Deserialize)]` declares them; `None`
/// for types that are not plain structs (maps, `#[serde(flatten)]`, ...).
pub fn field_names<T: DeserializeOwned>() -> Option<&'static [&'static str]> {
    let mut fields = None;
    // The probe records the fields and refuses everything, so `T` is never built.
    let _ = T::deserialize(FieldProbe(&mut fields));
    fields
}

/// A deserializer that records the fields a struct asks for, then fails.
struct FieldProbe<'a>(&'a mut Option<&'static [&'static str]>);

impl<'de> serde::Deserializer<'de> for FieldProbe<'_> {
    type Error = serde::de::value::Error;

    fn deserialize_any<V: serde::de::Visitor<'de>>(
        self,
        _: V,
    ) -> std::result::Result<V::Value, Self::Error> {
        Err(serde::de::Error::custom("not a struct"))
    }

    fn deserialize_struct<V: serde::de::Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> std::result::Result<V::Value, Self::Error> {
        *self.0 = Some(fields);
        Err(serde::de::Error::custom("fields recorded"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

/// The names among `keys` that are not channels of `state`, quoted and comma-separated;
/// `None` when every one is.
pub(crate) fn unknown_keys<'a, S: State>(
    state: &S,
    keys: impl IntoIterator<Item = &'a str>,
) -> Option<String> {
    let unknown: Vec<String> = keys
        .into_iter()
        .filter(|key| state.channel_index(key).is_none())
        .map(|key| format!("`{key}`"))
        .collect();
    (!unknown.is_empty()).then(|| unknown.join(", "))
}

/// The channels of `state`, quoted and comma-separated, for error messages.
pub(crate) fn channel_list<S: State>(state: &S) -> String {
    state
        .channels()
        .iter()
        .map(|c| format!("`{}`", c.name))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A typed input (LangGraph's input schema) as an update of `state`.
///
/// `input` must serialize to an object whose keys are channels of the state (an unknown key
/// is an error naming it) and input keys of it, with values the channels accept.
pub fn update_from<S: State, I: Serialize>(state: &S, input: &I) -> Result<S::Update> {
    let value = serde_json::to_value(input)
        .map_err(|e| Error::InvalidUpdate(format!("the input cannot be serialized: {e}")))?;
    let Value::Object(map) = value else {
        return Err(Error::InvalidUpdate(format!(
            "the input must be a struct or a map of channels, not {value}"
        )));
    };
    if let Some(unknown) = unknown_keys(state, map.keys().map(String::as_str)) {
        return Err(Error::InvalidUpdate(format!(
            "input keys {unknown} are not channels of this graph (its channels: {})",
            channel_list(state)
        )));
    }
    let update = serde_json::from_value(Value::Object(map))
        .map_err(|e| Error::InvalidUpdate(format!("the input does not fit the state: {e}")))?;
    check_input(state, &update)?;
    Ok(update)
}

/// `state` read as `T` (LangGraph's output schema, or a node's input schema): the channels
/// `T` has fields for, other channels ignored. A field `T` requires that the state does not
/// hold is an error naming it.
pub fn project_state<S: State, T: DeserializeOwned>(state: &S) -> Result<T> {
    let value = serde_json::to_value(state)
        .map_err(|e| Error::InvalidUpdate(format!("the state cannot be serialized: {e}")))?;
    serde_json::from_value(value).map_err(|e| {
        Error::InvalidUpdate(format!(
            "the state cannot be read as `{}`: {e}",
            std::any::type_name::<T>()
        ))
    })
}
