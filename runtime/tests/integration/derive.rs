//! `#[derive(State)]`: channels, reducers, the update type and codec round-trips.

use serde::{Deserialize, Serialize};
use waypoint_checkpoint::{Format, Serde, SerializedValue};
use waypoint_runtime::{ChannelSpec, Command, Error, Result, State};

/// Adds the update to the running total.
fn sum(current: &mut i64, update: i64) {
    *current += update;
}

/// Adds the update, refusing negative ones.
fn checked_sum(current: &mut i64, update: i64) -> Result<()> {
    if update < 0 {
        return Err(Error::InvalidUpdate(format!("negative amount {update}")));
    }
    *current += update;
    Ok(())
}

/// A reducer error of the user's own, converted through `Into<Error>`.
#[derive(Debug)]
struct Refused;

impl From<Refused> for Error {
    fn from(_: Refused) -> Self {
        Error::InvalidUpdate("refused".to_owned())
    }
}

/// Keeps the larger value; refuses zero with the user's own error type.
fn max_nonzero(current: &mut u32, update: u32) -> std::result::Result<(), Refused> {
    if update == 0 {
        return Err(Refused);
    }
    *current = (*current).max(update);
    Ok(())
}

mod reducers {
    /// Keeps the items in sorted order.
    pub(crate) fn merge_sorted(current: &mut Vec<i32>, update: Vec<i32>) {
        current.extend(update);
        current.sort_unstable();
    }
}

/// The example of the design: a last-value, an append and a custom channel.
#[derive(State, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct Demo {
    /// The latest text.
    foo: String,
    #[reducer(append)]
    bar: Vec<String>,
    #[reducer(sum)]
    total: i64,
}

/// Every kind of reducer the attribute accepts.
#[derive(State, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct Kinds {
    #[reducer(checked_sum)]
    checked: i64,
    #[reducer(max_nonzero)]
    peak: u32,
    #[reducer(reducers::merge_sorted)]
    sorted: Vec<i32>,
    #[reducer(|current: &mut String, update: String| current.push_str(&update))]
    text: String,
    r#type: Option<String>,
}

/// A renamed update type.
#[derive(State, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[state(update = "Patch")]
struct Renamed {
    value: u8,
}

/// A generic state.
#[derive(State, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct Generic<T> {
    last: Option<T>,
    #[reducer(append)]
    all: Vec<T>,
}

fn codecs() -> Vec<Serde> {
    vec![Serde::default(), Serde::new(Format::Json)]
}

fn demo() -> Demo {
    Demo {
        foo: "a".to_owned(),
        bar: vec!["x".to_owned(), "y".to_owned()],
        total: 5,
    }
}

#[test]
fn channels_follow_declaration_order_with_reduced_flags() {
    let state = Demo::default();
    assert_eq!(
        state.channels(),
        &[
            ChannelSpec::new("foo", false),
            ChannelSpec::concatenating("bar"),
            ChannelSpec::new("total", true),
        ]
    );
    assert_eq!(state.channel_index("bar"), Some(1));
    assert_eq!(state.channel_index("missing"), None);
}

#[test]
fn raw_identifiers_name_their_channel_without_prefix() {
    let state = Kinds::default();
    let names: Vec<&str> = state.channels().iter().map(|c| c.name.as_ref()).collect();
    assert_eq!(names, ["checked", "peak", "sorted", "text", "type"]);
    assert!(!state.channels()[4].reduced);
    let update = KindsUpdate::default().r#type("t".to_owned());
    assert_eq!(state.written(&update), vec![4]);
}

#[test]
fn apply_last_value_append_and_custom_reducer() -> Result<()> {
    let mut state = demo();
    state.apply(
        DemoUpdate::default()
            .foo("b")
            .bar(vec!["z".into()])
            .total(10),
    )?;
    assert_eq!(state.foo, "b");
    assert_eq!(state.bar, ["x", "y", "z"]);
    assert_eq!(state.total, 15);

    // Fields left `None` keep their value.
    state.apply(DemoUpdate::default().total(-3))?;
    assert_eq!(state.foo, "b");
    assert_eq!(state.bar, ["x", "y", "z"]);
    assert_eq!(state.total, 12);

    state.apply(DemoUpdate::default())?;
    assert_eq!(state.total, 12);
    Ok(())
}

#[test]
fn apply_every_reducer_form() -> Result<()> {
    let mut state = Kinds::default();
    let update = KindsUpdate::default()
        .checked(4)
        .peak(7u32)
        .sorted(vec![3, 1])
        .text("ab")
        .r#type("kind".to_owned());
    state.apply(update.clone())?;
    state.apply(update)?;
    assert_eq!(
        state,
        Kinds {
            checked: 8,
            peak: 7,
            sorted: vec![1, 1, 3, 3],
            text: "abab".to_owned(),
            r#type: Some("kind".to_owned()),
        }
    );
    Ok(())
}

#[test]
fn reducer_errors_are_returned() {
    let mut state = Kinds::default();
    let err = state
        .apply(KindsUpdate::default().checked(-1))
        .expect_err("a negative amount is refused");
    assert!(matches!(err, Error::InvalidUpdate(_)), "{err:?}");
    assert_eq!(state.checked, 0);

    // A reducer with its own error type, converted by `Into<Error>`.
    let err = state
        .apply(KindsUpdate::default().peak(0u32))
        .expect_err("zero is refused");
    assert!(
        matches!(err, Error::InvalidUpdate(ref m) if m == "refused"),
        "{err:?}"
    );
}

#[test]
fn channels_round_trip_through_every_codec() -> Result<()> {
    let state = demo();
    for serde in codecs() {
        let mut loaded = Demo::default();
        for channel in 0..state.channels().len() {
            let value = state
                .dump_channel(channel, &serde)?
                .expect("struct fields always hold a value");
            assert_eq!(value.type_tag, serde.format().tag());
            loaded.load_channel(channel, &value, &serde)?;
        }
        assert_eq!(loaded, state, "{:?}", serde.format());
    }
    Ok(())
}

#[test]
fn channel_values_encode_the_field_alone() -> Result<()> {
    let serde = Serde::new(Format::Json);
    let value = demo()
        .dump_channel(1, &serde)?
        .expect("struct fields always hold a value");
    assert_eq!(&value.bytes[..], br#"["x","y"]"#);
    Ok(())
}

#[test]
fn updates_round_trip_through_every_codec() -> Result<()> {
    let state = Demo::default();
    let update = DemoUpdate::default().foo("b").total(3);
    for serde in codecs() {
        let writes = state.dump_update(&update, &serde)?;
        let channels: Vec<usize> = writes.iter().map(|(c, _)| *c).collect();
        assert_eq!(channels, [0, 2]);

        let mut loaded = DemoUpdate::default();
        for (channel, value) in &writes {
            state.load_write(&mut loaded, *channel, value, &serde)?;
        }
        assert_eq!(loaded.foo.as_deref(), Some("b"));
        assert_eq!(loaded.bar, None);
        assert_eq!(loaded.total, Some(3));
    }
    Ok(())
}

#[test]
fn an_empty_update_writes_nothing() -> Result<()> {
    let state = Demo::default();
    let update = DemoUpdate::default();
    assert!(state.dump_update(&update, &Serde::default())?.is_empty());
    assert!(state.written(&update).is_empty());
    Ok(())
}

#[test]
fn corrupt_bytes_are_a_serialization_error() {
    let mut state = demo();
    for serde in codecs() {
        let garbage = SerializedValue::new(serde.format().tag(), b"\xc1\xff{not a value".to_vec());
        for channel in 0..3 {
            let err = state
                .load_channel(channel, &garbage, &serde)
                .expect_err("garbage does not decode");
            let expected = state.channels()[channel].name.to_string();
            assert!(
                matches!(&err, Error::Serialization { channel, .. } if *channel == expected),
                "{err:?}"
            );
            let mut update = DemoUpdate::default();
            let err = state
                .load_write(&mut update, channel, &garbage, &serde)
                .expect_err("garbage does not decode");
            assert!(matches!(err, Error::Serialization { .. }), "{err:?}");
        }
    }
    // A well-formed value of the wrong type is refused too.
    let serde = Serde::new(Format::Json);
    let text = serde.dumps("not a number").expect("a string encodes");
    let err = state
        .load_channel(2, &text, &serde)
        .expect_err("wrong type");
    assert!(matches!(err, Error::Serialization { .. }), "{err:?}");
    assert_eq!(state, demo(), "a failed load leaves the state unchanged");
}

#[test]
fn out_of_range_channels_are_errors() {
    let mut state = demo();
    let serde = Serde::default();
    let value = serde.dumps(&1_i64).expect("an integer encodes");
    assert!(matches!(
        state.dump_channel(3, &serde),
        Err(Error::InvalidUpdate(_))
    ));
    assert!(matches!(
        state.load_channel(usize::MAX, &value, &serde),
        Err(Error::InvalidUpdate(_))
    ));
    let mut update = DemoUpdate::default();
    assert!(matches!(
        state.load_write(&mut update, 3, &value, &serde),
        Err(Error::InvalidUpdate(_))
    ));
}

#[test]
fn written_lists_some_fields_in_channel_order() {
    let state = Demo::default();
    assert_eq!(
        state.written(&DemoUpdate::default().total(1).foo("x")),
        vec![0, 2]
    );
    assert_eq!(
        state.written(&DemoUpdate::default().bar(Vec::<String>::new())),
        vec![1]
    );
}

#[test]
fn builder_setters_set_some() {
    let update = DemoUpdate::default()
        .foo("a")
        .bar(vec!["a".into()])
        .total(2);
    assert_eq!(update.foo.as_deref(), Some("a"));
    assert_eq!(update.bar, Some(vec!["a".to_owned()]));
    assert_eq!(update.total, Some(2));
    // A later call replaces the earlier value.
    assert_eq!(update.foo("b").foo.as_deref(), Some("b"));
}

#[test]
fn update_serializes_only_its_some_fields() -> std::result::Result<(), serde_json::Error> {
    let update = DemoUpdate::default().bar(vec!["a".into()]);
    assert_eq!(serde_json::to_string(&update)?, r#"{"bar":["a"]}"#);

    let update: DemoUpdate = serde_json::from_str(r#"{"total":4}"#)?;
    assert_eq!(
        (update.foo, update.bar, update.total),
        (None, None, Some(4))
    );
    let update: DemoUpdate = serde_json::from_str("{}")?;
    assert!(Demo::default().written(&update).is_empty());
    Ok(())
}

#[test]
fn update_converts_into_a_command() {
    let command: Command<Demo> = DemoUpdate::default().foo("a").into();
    assert!(command.goto.is_empty());
    let update = command.update.expect("the update is kept");
    assert_eq!(update.foo.as_deref(), Some("a"));
}

#[test]
fn update_type_can_be_renamed() -> Result<()> {
    let mut state = Renamed::default();
    let patch: Patch = Patch::default().value(9u8);
    assert_eq!(state.channels(), &[ChannelSpec::new("value", false)]);
    let command: Command<Renamed> = patch.clone().into();
    assert!(command.update.is_some());
    state.apply(patch)?;
    assert_eq!(state.value, 9);
    Ok(())
}

#[test]
fn generic_states_are_supported() -> Result<()> {
    let mut state = Generic::<u16>::default();
    state.apply(GenericUpdate::default().last(Some(1u16)).all(vec![1u16, 2]))?;
    state.apply(GenericUpdate::default().all(vec![3u16]))?;
    assert_eq!(state.last, Some(1));
    assert_eq!(state.all, [1, 2, 3]);

    let serde = Serde::default();
    let mut loaded = Generic::<u16>::default();
    for channel in 0..2 {
        let value = state.dump_channel(channel, &serde)?.expect("a value");
        loaded.load_channel(channel, &value, &serde)?;
    }
    assert_eq!(loaded, state);
    let _: Command<Generic<u16>> = GenericUpdate::<u16>::default().into();
    Ok(())
}
