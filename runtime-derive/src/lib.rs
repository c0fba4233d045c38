//! The `#[derive(State)]` macro of `waypoint-runtime`; use it through `waypoint_runtime::State`.
//!
//! Each named field of the struct becomes a channel, in declaration order. A field with
//! `#[reducer(f)]` folds its updates with `f` (`append` and `add_messages` name the built-ins
//! in `waypoint_runtime::reducers`; any other path or closure is used as written and must be
//! a `fn(&mut T, T)` or `fn(&mut T, T) -> Result<(), E>` with `E: Into<waypoint_runtime::Error>`);
//! a field without one keeps the last value written.
//!
//! For `struct Demo` the derive also writes `DemoUpdate` (rename it with
//! `#[state(update = "Other")]`): one `Option` per field, serde-derived with absent fields
//! skipped, a builder setter per field, and `From<DemoUpdate> for Command<Demo>`.
//!
//! The generated code reaches serde and the codec types through
//! `waypoint_runtime::__private`, so a crate using the derive needs no other dependency.

mod attrs;
mod expand;

use proc_macro::TokenStream;

/// Derives `waypoint_runtime::State` and the struct's partial update type.
#[proc_macro_derive(State, attributes(reducer, state))]
pub fn derive_state(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as syn::DeriveInput);
    expand::expand(&input)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}
