//! Namespaces, items and the operations a [`Store`](crate::Store) batch carries.

use std::fmt;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use crate::{Error, Result};

/// A JSON object: what every item holds.
pub type Object = Map<String, Value>;

/// The wildcard label of [`ListNamespacesOp`] conditions: matches exactly one label.
pub const WILDCARD: &str = "*";

/// A hierarchical namespace such as `("users", "alice", "memories")`.
///
/// Stored as its labels joined by `.` (LangGraph's encoding), so labels cannot contain `.`;
/// every operation validates its namespace (see [`Namespace::validate`]).
#[derive(Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Namespace(Vec<String>);

impl Namespace {
    /// Builds a namespace from its labels (not validated yet).
    pub fn new<I, S>(labels: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Namespace(labels.into_iter().map(Into::into).collect())
    }

    /// The empty namespace: as a search or listing prefix it matches everything.
    pub fn root() -> Self {
        Namespace(Vec::new())
    }

    /// The labels, outermost first.
    pub fn labels(&self) -> &[String] {
        &self.0
    }

    /// How many labels it has.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether it has no labels.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The labels joined by `.`, as the SQL backends store it.
    pub fn joined(&self) -> String {
        self.0.join(".")
    }

    /// Splits a stored dot-joined namespace back into labels.
    pub fn from_joined(joined: &str) -> Self {
        Namespace(joined.split('.').map(str::to_owned).collect())
    }

    /// Whether `prefix` is this namespace or one of its ancestors, on whole labels.
    pub fn starts_with(&self, prefix: &Namespace) -> bool {
        self.0.starts_with(&prefix.0)
    }

    /// Checks the namespace of an item: non-empty, labels non-empty and without `.`, and a
    /// root other than the reserved `langgraph`.
    pub fn validate(&self) -> Result<()> {
        if self.0.is_empty() {
            return Err(self.invalid("a namespace needs at least one label"));
        }
        if self.0[0] == "langgraph" {
            return Err(self.invalid("the root label `langgraph` is reserved"));
        }
        self.validate_labels()
    }

    /// Checks a prefix: like [`validate`](Self::validate), but empty is allowed (everything).
    pub fn validate_prefix(&self) -> Result<()> {
        self.validate_labels()
    }

    fn validate_labels(&self) -> Result<()> {
        for label in &self.0 {
            if label.is_empty() {
                return Err(self.invalid("labels cannot be empty"));
            }
            // A byte search: `.` is ASCII, and this runs for every label of every op.
            if label.as_bytes().contains(&b'.') {
                return Err(self.invalid("labels cannot contain `.`"));
            }
        }
        Ok(())
    }

    fn invalid(&self, reason: &'static str) -> Error {
        Error::InvalidNamespace {
            namespace: self.0.clone(),
            reason,
        }
    }
}

impl fmt::Debug for Namespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Namespace").field(&self.0).finish()
    }
}

impl<S: Into<String>, const N: usize> From<[S; N]> for Namespace {
    fn from(labels: [S; N]) -> Self {
        Namespace::new(labels)
    }
}

impl<S: Into<String>> From<Vec<S>> for Namespace {
    fn from(labels: Vec<S>) -> Self {
        Namespace::new(labels)
    }
}

impl From<&[&str]> for Namespace {
    fn from(labels: &[&str]) -> Self {
        Namespace::new(labels.iter().copied())
    }
}

impl From<&Namespace> for Namespace {
    fn from(namespace: &Namespace) -> Self {
        namespace.clone()
    }
}

/// Names one item: its namespace and key.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ItemKey {
    /// The item's namespace.
    pub namespace: Namespace,
    /// The item's key.
    pub key: String,
}

impl ItemKey {
    /// Names `key` in `namespace`.
    pub fn new(namespace: impl Into<Namespace>, key: impl Into<String>) -> Self {
        ItemKey {
            namespace: namespace.into(),
            key: key.into(),
        }
    }
}

/// A stored document.
#[derive(Clone, Debug, PartialEq)]
pub struct Item {
    /// Where it lives.
    pub namespace: Namespace,
    /// Its key within the namespace.
    pub key: String,
    /// The document, a JSON object.
    pub value: Object,
    /// When it was first put; kept across updates.
    pub created_at: DateTime<Utc>,
    /// When it was last put.
    pub updated_at: DateTime<Utc>,
}

/// An item found by a search, with its relevance when the search had a query.
#[derive(Clone, Debug, PartialEq)]
pub struct SearchItem {
    /// The item.
    pub item: Item,
    /// Similarity to the query (cosine, dot product or negative L2); `None` without a query.
    pub score: Option<f32>,
}

impl std::ops::Deref for SearchItem {
    type Target = Item;

    fn deref(&self) -> &Item {
        &self.item
    }
}

/// How a put is embedded for semantic search.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Index {
    /// The store's configured fields.
    #[default]
    Default,
    /// Not embedded: the item is left out of semantic results (its old vectors are removed).
    Off,
    /// These JSON paths instead of the configured ones.
    Fields(Vec<String>),
}

/// How long a put item lives.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum Ttl {
    /// The store's `default_ttl`, or forever when it has none.
    #[default]
    Default,
    /// Forever, whatever the store's default.
    Never,
    /// This many minutes (fractions are kept exactly), refreshed on reads.
    Minutes(f64),
}

/// Reads one item.
#[derive(Clone, Debug, PartialEq)]
pub struct GetOp {
    /// The item's namespace.
    pub namespace: Namespace,
    /// The item's key.
    pub key: String,
    /// Whether to restart the item's TTL; `None` uses the store's `refresh_on_read`.
    pub refresh_ttl: Option<bool>,
}

/// Writes (or, with `value: None`, deletes) one item.
#[derive(Clone, Debug, PartialEq)]
pub struct PutOp {
    /// The item's namespace.
    pub namespace: Namespace,
    /// The item's key.
    pub key: String,
    /// The new document; `None` deletes the item.
    pub value: Option<Object>,
    /// How to embed it.
    pub index: Index,
    /// How long it lives.
    pub ttl: Ttl,
}

/// Finds items under a namespace prefix, by filter and optionally by meaning.
#[derive(Clone, Debug, PartialEq)]
pub struct SearchOp {
    /// Matches this namespace and its descendants, on whole labels; empty matches all.
    pub namespace_prefix: Namespace,
    /// Natural-language query; without one, results are ordered newest update first.
    pub query: Option<String>,
    /// Conditions on top-level value keys: `{"k": v}` or `{"k": {"$gt": v}}`.
    pub filter: Option<Object>,
    /// Page size.
    pub limit: usize,
    /// Items skipped before the page.
    pub offset: usize,
    /// Whether to restart the TTL of returned items; `None` uses the store's setting.
    pub refresh_ttl: Option<bool>,
}

/// Lists the namespaces that hold items.
#[derive(Clone, Debug, PartialEq)]
pub struct ListNamespacesOp {
    /// Leading labels that must match; `*` matches any one label.
    pub prefix: Option<Vec<String>>,
    /// Trailing labels that must match; `*` matches any one label.
    pub suffix: Option<Vec<String>>,
    /// Namespaces are cut to this many labels, then de-duplicated.
    pub max_depth: Option<usize>,
    /// Page size.
    pub limit: usize,
    /// Namespaces skipped before the page.
    pub offset: usize,
}

/// One operation of a batch.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// Read an item.
    Get(GetOp),
    /// Write or delete an item.
    Put(PutOp),
    /// Search items.
    Search(SearchOp),
    /// List namespaces.
    ListNamespaces(ListNamespacesOp),
}

/// The result of one [`Op`], at the same position as the op.
#[derive(Clone, Debug, PartialEq)]
pub enum OpResult {
    /// From [`Op::Get`]: the item, if it exists and has not expired.
    Item(Option<Item>),
    /// From [`Op::Put`].
    Done,
    /// From [`Op::Search`].
    Items(Vec<SearchItem>),
    /// From [`Op::ListNamespaces`].
    Namespaces(Vec<Namespace>),
}

impl SearchOp {
    /// A search of everything under `prefix`: first page of 10, no query, no filter.
    pub fn new(namespace_prefix: impl Into<Namespace>) -> Self {
        SearchOp {
            namespace_prefix: namespace_prefix.into(),
            query: None,
            filter: None,
            limit: 10,
            offset: 0,
            refresh_ttl: None,
        }
    }

    /// Ranks by similarity to `query`.
    pub fn query(mut self, query: impl Into<String>) -> Self {
        self.query = Some(query.into());
        self
    }

    /// Keeps items matching `filter` (a JSON object; anything else is an invalid filter).
    pub fn filter(mut self, filter: Value) -> Self {
        self.filter = Some(match filter {
            Value::Object(map) => map,
            other => Object::from_iter([(String::from("$invalid"), other)]),
        });
        self
    }

    /// Sets the page size.
    pub fn limit(mut self, limit: usize) -> Self {
        self.limit = limit;
        self
    }

    /// Sets how many items to skip.
    pub fn offset(mut self, offset: usize) -> Self {
        self.offset = offset;
        self
    }

    /// Overrides the store's refresh-on-read setting.
    pub fn refresh_ttl(mut self, refresh: bool) -> Self {
        self.refresh_ttl = Some(refresh);
        self
    }
}

impl Default for ListNamespacesOp {
    fn default() -> Self {
        ListNamespacesOp {
            prefix: None,
            suffix: None,
            max_depth: None,
            limit: 100,
            offset: 0,
        }
    }
}

impl ListNamespacesOp {
    /// Every namespace, first page of 100.
    pub fn new() -> Self {
        Self::default()
    }

    /// Requires these leading labels (`*` for any one).
    pub fn prefix<I: IntoIterator<Item = S>, S: Into<String>>(mut self, labels: I) -> Self {
        self.prefix = Some(labels.into_iter().map(Into::into).collect());
        self
    }

    /// Requires these trailing labels (`*` for any one).
    pub fn suffix<I: IntoIterator<Item = S>, S: Into<String>>(mut self, labels: I) -> Self {
        self.suffix = Some(labels.into_iter().map(Into::into).collect());
        self
    }

    /// Cuts namespaces to `depth` labels.
    pub fn max_depth(mut self, depth: usize) -> Self {
        self.max_depth = Some(depth);
        self
    }

    /// Sets the page size.
    pub fn limit(mut self, limit: usize) -> Self {
        self.limit = limit;
        self
    }

    /// Sets how many namespaces to skip.
    pub fn offset(mut self, offset: usize) -> Self {
        self.offset = offset;
        self
    }
}

impl PutOp {
    /// Puts `value` with the default index and TTL.
    pub fn new(namespace: impl Into<Namespace>, key: impl Into<String>, value: Object) -> Self {
        PutOp {
            namespace: namespace.into(),
            key: key.into(),
            value: Some(value),
            index: Index::Default,
            ttl: Ttl::Default,
        }
    }

    /// Deletes the item.
    pub fn delete(namespace: impl Into<Namespace>, key: impl Into<String>) -> Self {
        PutOp {
            namespace: namespace.into(),
            key: key.into(),
            value: None,
            index: Index::Default,
            ttl: Ttl::Default,
        }
    }

    /// Sets how the item is embedded.
    pub fn index(mut self, index: Index) -> Self {
        self.index = index;
        self
    }

    /// Sets how long the item lives.
    pub fn ttl(mut self, ttl: Ttl) -> Self {
        self.ttl = ttl;
        self
    }
}

impl GetOp {
    /// Reads `key` in `namespace` with the store's refresh setting.
    pub fn new(namespace: impl Into<Namespace>, key: impl Into<String>) -> Self {
        GetOp {
            namespace: namespace.into(),
            key: key.into(),
            refresh_ttl: None,
        }
    }
}
