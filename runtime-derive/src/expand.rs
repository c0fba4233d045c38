//! Code generation for `#[derive(State)]`.

use proc_macro2::{Literal, TokenStream};
use quote::{quote, quote_spanned};
use syn::{
    Attribute, Data, DataStruct, DeriveInput, Fields, GenericParam, Ident, LitStr, Type,
    WhereClause, parse_quote,
};

use crate::attrs::{Reducer, StateOptions};

/// One field of the state, i.e. one channel.
struct Channel<'a> {
    /// The field's identifier (possibly raw, `r#type`).
    ident: &'a Ident,
    /// The channel name: the identifier without `r#`.
    name: LitStr,
    ty: &'a Type,
    reducer: Reducer,
    /// The field's own doc comments, reused on the update's field.
    docs: Vec<&'a Attribute>,
}

/// The whole expansion, or the errors in the input (all bad attributes at once).
pub(crate) fn expand(input: &DeriveInput) -> syn::Result<TokenStream> {
    let state = &input.ident;
    let fields = named_fields(input)?;
    if let Some(lt) = input.generics.lifetimes().next() {
        return Err(syn::Error::new_spanned(
            lt,
            "`#[derive(State)]` does not support lifetime parameters: a state is checkpointed \
             and moved between tasks, so it must own its data (`State: 'static`)",
        ));
    }
    // Every bad attribute is reported at once, not one per build.
    let options = StateOptions::parse(&input.attrs, state);
    let mut channels = Vec::with_capacity(fields.len());
    let mut errors: Option<syn::Error> = None;
    for field in fields {
        match channel(field) {
            Ok(c) => channels.push(c),
            Err(e) => match &mut errors {
                Some(all) => all.combine(e),
                None => errors = Some(e),
            },
        }
    }
    let options = match (options, errors) {
        (Ok(options), None) => options,
        (Ok(_), Some(errors)) => return Err(errors),
        (Err(mut error), more) => {
            error.extend(more);
            return Err(error);
        }
    };

    let update = update_type(input, &options.update, &channels);
    let state_impl = state_impl(input, &options.update, &channels);
    Ok(quote! {
        #update
        #state_impl
    })
}

/// The channel of one named field.
fn channel(field: &syn::Field) -> syn::Result<Channel<'_>> {
    let ident = field
        .ident
        .as_ref()
        .ok_or_else(|| syn::Error::new_spanned(field, "`#[derive(State)]` needs named fields"))?;
    let name = syn::ext::IdentExt::unraw(ident).to_string();
    Ok(Channel {
        ident,
        name: LitStr::new(&name, ident.span()),
        ty: &field.ty,
        reducer: Reducer::parse(&field.attrs)?,
        docs: field
            .attrs
            .iter()
            .filter(|a| a.path().is_ident("doc"))
            .collect(),
    })
}

/// The struct's named fields, or an error spanned on what makes the input unsupported.
fn named_fields(input: &DeriveInput) -> syn::Result<Vec<&syn::Field>> {
    const NEED: &str = "`#[derive(State)]` needs a struct with named fields: each field is a \
                        channel named after it";
    match &input.data {
        Data::Struct(DataStruct {
            fields: Fields::Named(named),
            ..
        }) => Ok(named.named.iter().collect()),
        Data::Struct(DataStruct {
            fields: Fields::Unnamed(unnamed),
            ..
        }) => Err(syn::Error::new_spanned(
            unnamed,
            format!("{NEED}; a tuple struct's fields have no names"),
        )),
        Data::Struct(DataStruct {
            fields: Fields::Unit,
            ..
        }) => Err(syn::Error::new_spanned(
            &input.ident,
            format!("{NEED}; a unit struct has no channels"),
        )),
        Data::Enum(e) => Err(syn::Error::new_spanned(
            e.enum_token,
            format!("{NEED}, not an enum"),
        )),
        Data::Union(u) => Err(syn::Error::new_spanned(
            u.union_token,
            format!("{NEED}, not a union"),
        )),
    }
}

/// Whether the state has type or const parameters (the generated impls then need bounds).
fn is_generic(input: &DeriveInput) -> bool {
    input
        .generics
        .params
        .iter()
        .any(|p| matches!(p, GenericParam::Type(_) | GenericParam::Const(_)))
}

/// `XUpdate`: the struct, its `Default` and its builder setters.
fn update_type(input: &DeriveInput, update: &Ident, channels: &[Channel<'_>]) -> TokenStream {
    let state = &input.ident;
    let vis = &input.vis;
    let generics = &input.generics;
    let (impl_generics, ty_generics, where_clause) = generics.split_for_impl();

    let struct_doc = LitStr::new(
        &format!(
            "A partial update of [`{state}`]: a new value for each `Some` field, folded into \
             the state by the field's reducer."
        ),
        state.span(),
    );
    // A field-level `default` makes serde require `T: Default` of a type parameter in the
    // field's type; naming the function instead keeps `Option<T>`'s own default.
    let serde_default = if is_generic(input) {
        quote!(default = "::core::default::Default::default")
    } else {
        quote!(default)
    };

    let fields = channels.iter().map(|c| {
        let Channel { ident, ty, .. } = c;
        let docs = if c.docs.is_empty() {
            let text = match c.reducer {
                Reducer::LastValue => format!(
                    "The new value of the `{}` channel (the last value written wins).",
                    c.name.value()
                ),
                Reducer::Fn(..) | Reducer::Appending(..) => format!(
                    "A value for the `{}` channel, folded in by its reducer.",
                    c.name.value()
                ),
            };
            let text = LitStr::new(&text, ident.span());
            quote!(#[doc = #text])
        } else {
            let docs = &c.docs;
            quote!(#(#docs)*)
        };
        quote! {
            #docs
            #[serde(#serde_default, skip_serializing_if = "::core::option::Option::is_none")]
            #vis #ident: ::core::option::Option<#ty>,
        }
    });

    let setters = channels.iter().map(|c| {
        let Channel { ident, ty, .. } = c;
        let doc = LitStr::new(
            &format!(
                "Sets the `{}` channel's value in this update.",
                c.name.value()
            ),
            ident.span(),
        );
        quote! {
            #[doc = #doc]
            #[must_use]
            #vis fn #ident(mut self, value: impl ::core::convert::Into<#ty>) -> Self {
                self.#ident = ::core::option::Option::Some(value.into());
                self
            }
        }
    });

    let nones = channels.iter().map(|c| {
        let ident = c.ident;
        quote!(#ident: ::core::option::Option::None,)
    });

    quote! {
        #[doc = #struct_doc]
        #[derive(::core::clone::Clone, ::core::fmt::Debug, ::waypoint_runtime::__private::serde::Serialize, ::waypoint_runtime::__private::serde::Deserialize)]
        #[serde(crate = "::waypoint_runtime::__private::serde")]
        #vis struct #update #generics #where_clause {
            #(#fields)*
        }

        // Written out rather than derived: a derive would require `T: Default` of every type
        // parameter, while an empty update needs none.
        impl #impl_generics ::core::default::Default for #update #ty_generics #where_clause {
            fn default() -> Self {
                #update { #(#nones)* }
            }
        }

        impl #impl_generics #update #ty_generics #where_clause {
            #(#setters)*
        }
    }
}

/// `impl State for X` and `impl From<XUpdate> for Command<X>`.
fn state_impl(input: &DeriveInput, update: &Ident, channels: &[Channel<'_>]) -> TokenStream {
    let state = &input.ident;
    let (impl_generics, ty_generics, _) = input.generics.split_for_impl();
    let where_clause = state_where_clause(input, update, channels);
    let rt = quote!(::waypoint_runtime);
    let serde_ty = quote!(::waypoint_runtime::__private::Serde);
    let value_ty = quote!(::waypoint_runtime::__private::SerializedValue);
    let some = quote!(::core::option::Option::Some);

    let specs = channels.iter().map(|c| {
        let name = &c.name;
        match c.reducer {
            Reducer::LastValue => quote!(#rt::ChannelSpec::new(#name, false),),
            Reducer::Fn(..) => quote!(#rt::ChannelSpec::new(#name, true),),
            Reducer::Appending(_, _, false) => quote!(#rt::ChannelSpec::appending(#name),),
            Reducer::Appending(_, _, true) => quote!(#rt::ChannelSpec::concatenating(#name),),
        }
    });
    let indices: Vec<Literal> = (0..channels.len()).map(Literal::usize_unsuffixed).collect();
    let idents: Vec<&Ident> = channels.iter().map(|c| c.ident).collect();
    let names: Vec<&LitStr> = channels.iter().map(|c| &c.name).collect();
    let tys: Vec<&Type> = channels.iter().map(|c| c.ty).collect();

    let no_channel = {
        let state_name = LitStr::new(&state.to_string(), state.span());
        quote! {
            ::core::result::Result::Err(#rt::Error::InvalidUpdate(::std::format!(
                "`{}` has no channel {}", #state_name, channel
            )))
        }
    };
    let apply = channels.iter().map(|c| {
        let Channel { ident, .. } = c;
        let fold = match &c.reducer {
            Reducer::LastValue => quote!(self.#ident = value;),
            // Spanned on the attribute, so a reducer of the wrong type is reported there.
            Reducer::Fn(f, span) | Reducer::Appending(f, span, _) => {
                quote_spanned!(*span=> ::waypoint_runtime::state::reduce(#f, &mut self.#ident, value)?;)
            }
        };
        quote! {
            if let #some(value) = update.#ident {
                #fold
            }
        }
    });
    // An empty struct leaves the codec and update parameters unused.
    let allow_unused = channels
        .is_empty()
        .then(|| quote!(#[allow(unused_variables, unused_mut)]));

    quote! {
        #allow_unused
        impl #impl_generics #rt::State for #state #ty_generics #where_clause {
            type Update = #update #ty_generics;

            fn channels(&self) -> &[#rt::ChannelSpec] {
                const CHANNELS: &[#rt::ChannelSpec] = &[#(#specs)*];
                CHANNELS
            }

            fn dump_channel(
                &self,
                channel: usize,
                serde: &#serde_ty,
            ) -> #rt::Result<::core::option::Option<#value_ty>> {
                match channel {
                    #(#indices => serde
                        .dumps(&self.#idents)
                        .map(#some)
                        .map_err(|e| #rt::state::channel_error(#names, e)),)*
                    _ => #no_channel,
                }
            }

            fn load_channel(
                &mut self,
                channel: usize,
                value: &#value_ty,
                serde: &#serde_ty,
            ) -> #rt::Result<()> {
                match channel {
                    #(#indices => {
                        self.#idents = serde
                            .loads::<#tys>(value)
                            .map_err(|e| #rt::state::channel_error(#names, e))?;
                        ::core::result::Result::Ok(())
                    })*
                    _ => #no_channel,
                }
            }

            fn dump_update(
                &self,
                update: &Self::Update,
                serde: &#serde_ty,
            ) -> #rt::Result<::std::vec::Vec<(usize, #value_ty)>> {
                let mut writes = ::std::vec::Vec::new();
                #(if let #some(value) = &update.#idents {
                    let value = serde
                        .dumps(value)
                        .map_err(|e| #rt::state::channel_error(#names, e))?;
                    writes.push((#indices, value));
                })*
                ::core::result::Result::Ok(writes)
            }

            fn load_write(
                &self,
                update: &mut Self::Update,
                channel: usize,
                value: &#value_ty,
                serde: &#serde_ty,
            ) -> #rt::Result<()> {
                match channel {
                    #(#indices => {
                        update.#idents = #some(serde
                            .loads::<#tys>(value)
                            .map_err(|e| #rt::state::channel_error(#names, e))?);
                        ::core::result::Result::Ok(())
                    })*
                    _ => #no_channel,
                }
            }

            fn written(&self, update: &Self::Update) -> ::std::vec::Vec<usize> {
                let mut written = ::std::vec::Vec::new();
                #(if update.#idents.is_some() {
                    written.push(#indices);
                })*
                written
            }

            fn apply(&mut self, update: Self::Update) -> #rt::Result<()> {
                #(#apply)*
                ::core::result::Result::Ok(())
            }

            fn copy_channel(
                &mut self,
                from: &Self,
                channel: usize,
                _serde: &#serde_ty,
            ) -> #rt::Result<()> {
                match channel {
                    #(#indices => self.#idents = ::core::clone::Clone::clone(&from.#idents),)*
                    _ => return ::core::result::Result::Err(#rt::Error::InvalidUpdate(
                        ::std::format!("no channel {channel}"),
                    )),
                }
                ::core::result::Result::Ok(())
            }
        }

        impl #impl_generics ::core::convert::From<#update #ty_generics>
            for #rt::Command<#state #ty_generics>
        #where_clause
        {
            fn from(update: #update #ty_generics) -> Self {
                #rt::Command::update(update)
            }
        }
    }
}

/// The user's where clause, plus for a generic state the bounds `State` needs of it, of its
/// update type and of each field type (so the impl states them instead of failing inside).
fn state_where_clause(
    input: &DeriveInput,
    update: &Ident,
    channels: &[Channel<'_>],
) -> Option<WhereClause> {
    let mut where_clause = input.generics.where_clause.clone();
    if !is_generic(input) {
        return where_clause;
    }
    let state = &input.ident;
    let (_, ty_generics, _) = input.generics.split_for_impl();
    let clause = where_clause.get_or_insert_with(|| parse_quote!(where));
    for param in input.generics.type_params() {
        let ident = &param.ident;
        clause.predicates.push(parse_quote!(#ident: 'static));
    }
    clause.predicates.push(parse_quote! {
        #state #ty_generics: ::core::clone::Clone + ::core::fmt::Debug + ::core::marker::Send
            + ::core::marker::Sync + ::waypoint_runtime::__private::serde::Serialize + ::waypoint_runtime::__private::serde::de::DeserializeOwned + 'static
    });
    clause.predicates.push(parse_quote! {
        #update #ty_generics: ::core::clone::Clone + ::core::fmt::Debug
            + ::core::default::Default + ::core::marker::Send + ::core::marker::Sync
            + ::waypoint_runtime::__private::serde::Serialize + ::waypoint_runtime::__private::serde::de::DeserializeOwned + 'static
    });
    for c in channels {
        let ty = c.ty;
        clause
            .predicates
            .push(parse_quote!(#ty: ::core::clone::Clone + ::waypoint_runtime::__private::serde::Serialize + ::waypoint_runtime::__private::serde::de::DeserializeOwned));
    }
    where_clause
}
