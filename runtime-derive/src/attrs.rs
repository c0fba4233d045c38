//! Parsing of `#[state(...)]` on the struct and `#[reducer(...)]` on its fields.

use proc_macro2::Span;
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Attribute, Expr, Ident, LitStr, Path};

/// Reducers of `waypoint_runtime::reducers` that `#[reducer(name)]` refers to by bare name.
const BUILT_IN_REDUCERS: &[&str] = &["append", "add_messages"];

/// Options from `#[state(...)]` on the struct.
pub(crate) struct StateOptions {
    /// The update type's name (`<State>Update` unless renamed).
    pub(crate) update: Ident,
}

impl StateOptions {
    /// Reads the struct's attributes; `state` is the struct's name.
    pub(crate) fn parse(attrs: &[Attribute], state: &Ident) -> syn::Result<Self> {
        let mut update: Option<Ident> = None;
        for attr in attrs.iter().filter(|a| a.path().is_ident("state")) {
            if !matches!(attr.meta, syn::Meta::List(_)) {
                return Err(syn::Error::new_spanned(
                    attr,
                    "expected `#[state(update = \"Name\")]`",
                ));
            }
            attr.parse_nested_meta(|meta| {
                if meta.path.is_ident("update") {
                    if update.is_some() {
                        return Err(meta.error("`update` is given twice"));
                    }
                    // Accept both `update = "Name"` (as serde does) and `update = Name`.
                    let value = meta.value()?;
                    let ident = if value.peek(LitStr) {
                        let lit: LitStr = value.parse()?;
                        lit.parse::<Ident>().map_err(|_| {
                            syn::Error::new(
                                lit.span(),
                                "`update` must name a type, e.g. `update = \"DemoUpdate\"`",
                            )
                        })?
                    } else {
                        value.parse::<Ident>()?
                    };
                    update = Some(ident);
                    Ok(())
                } else {
                    let path = &meta.path;
                    let key = quote!(#path).to_string().replace(' ', "");
                    Err(meta.error(format!(
                        "unknown `state` option `{key}`; expected `update = \"Name\"`"
                    )))
                }
            })?;
        }
        Ok(StateOptions {
            update: update.unwrap_or_else(|| format_ident!("{}Update", state)),
        })
    }
}

/// How one field's writes combine with its value.
pub(crate) enum Reducer {
    /// The last value written wins.
    LastValue,
    /// Folded by this function (a path or closure, already resolved for built-ins), written
    /// at this span in the attribute.
    Fn(proc_macro2::TokenStream, Span),
    /// A built-in reducer that only appends (`append`, `add_messages`): the channel is
    /// stored as per-step deltas; `true` for `append`, a plain concatenation.
    Appending(proc_macro2::TokenStream, Span, bool),
}

impl Reducer {
    /// Reads a field's attributes: at most one `#[reducer(...)]`, and no `#[state]`.
    pub(crate) fn parse(attrs: &[Attribute]) -> syn::Result<Self> {
        let mut reducer = Reducer::LastValue;
        let mut seen = false;
        for attr in attrs {
            if attr.path().is_ident("state") {
                return Err(syn::Error::new_spanned(
                    attr,
                    "`#[state(...)]` goes on the struct, not on a field",
                ));
            }
            if !attr.path().is_ident("reducer") {
                continue;
            }
            if seen {
                return Err(syn::Error::new_spanned(
                    attr,
                    "a field takes one `#[reducer(...)]`",
                ));
            }
            seen = true;
            let (f, span, builtin) = parse_reducer(attr)?;
            reducer = match builtin {
                Some(name) => Reducer::Appending(f, span, name == "append"),
                None => Reducer::Fn(f, span),
            };
        }
        Ok(reducer)
    }
}

/// The function of one `#[reducer(...)]`, and the built-in it names, if any.
fn parse_reducer(
    attr: &Attribute,
) -> syn::Result<(proc_macro2::TokenStream, Span, Option<&'static str>)> {
    let usage = "expected `#[reducer(f)]` with `f` a path such as `append`, `add_messages` or \
                 `my_module::merge`, or a closure";
    let list = match &attr.meta {
        syn::Meta::List(list) if !list.tokens.is_empty() => list,
        _ => return Err(syn::Error::new_spanned(attr, usage)),
    };
    let expr: Expr = syn::parse2(list.tokens.clone())
        .map_err(|e| syn::Error::new(e.span(), format!("{usage}: {e}")))?;
    let span = expr.span();
    match expr {
        Expr::Path(p) if p.qself.is_none() => {
            let builtin = p
                .path
                .get_ident()
                .and_then(|ident| BUILT_IN_REDUCERS.iter().copied().find(|b| ident == b));
            Ok((resolve_path(&p.path), span, builtin))
        }
        Expr::Closure(c) => Ok((quote!(#c), span, None)),
        other => Err(syn::Error::new(other.span(), usage)),
    }
}

/// Maps a bare built-in name to `::waypoint_runtime::reducers::name`; other paths stay.
fn resolve_path(path: &Path) -> proc_macro2::TokenStream {
    if let Some(ident) = path.get_ident()
        && BUILT_IN_REDUCERS.iter().any(|b| ident == b)
    {
        // The user's span, so an unknown built-in (a missing feature) points at the attribute.
        let span: Span = ident.span();
        return quote_spanned!(span=> ::waypoint_runtime::reducers::#ident);
    }
    quote!(#path)
}
