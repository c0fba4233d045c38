//! Namespaces, items and the operations a [`Store`](crate::Store) batch carries.
//!
//! Items, search results and the search and listing operations have serde forms, the JSON
//! shapes of LangGraph's HTTP API (`langgraph_sdk.schema`), so a service can take and return
//! them as they are. Deserializing does not validate namespaces; the operation does.

use std::fmt;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

use crate::{Error, Result};

/// A JSON object: what every item holds.
pub type Object = Map<String, Value>;

/// The wildcard label of [`ListNamespacesOp`] conditions: matches exactly one label.
pub const WILDCARD: &str = "*";

/// A hierarchical namespace such as `("users", "alice", "memories")`.
///
/// Stored as its labels joined by `.` (LangGraph's encoding), so labels cannot contain `.`;
/// every operation validates its namespace (see [`Namespace::validate`]). Its serde form is
/// the list of its labels. The labels are shared: a clone (every key, item and row that names
/// the namespace holds one) copies a pointer, not the labels.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[serde(from = "Vec<String>")]
pub struct Namespace(Arc<[String]>);

impl Default for Namespace {
    fn default() -> Self {
        Namespace::root()
    }
}

impl Serialize for Namespace {
    fn serialize<S: serde::Serializer>(
        &self,
        serializer: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter())
    }
}

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
        Namespace(Arc::from([]))
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
        for label in self.0.iter() {
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
            namespace: self.0.to_vec(),
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
///
/// Its serde form is the LangGraph API's `Item`: `namespace` (a list of labels), `key`,
/// `value`, `created_at` and `updated_at` as RFC 3339 strings in UTC
/// (`"2024-07-30T12:00:00.123456Z"`; reading takes any offset, such as Python's `+00:00`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Item {
    /// Where it lives.
    pub namespace: Namespace,
    /// Its key within the namespace.
    pub key: String,
    /// The document, a JSON object, shared with the store that read it where it can be (the
    /// in-memory store hands out its own copy without copying it); `Arc::make_mut` or
    /// `Arc::unwrap_or_clone` give a document of one's own.
    #[serde(
        serialize_with = "shared::serialize",
        deserialize_with = "shared::deserialize"
    )]
    pub value: Arc<Object>,
    /// When it was first put; kept across updates.
    pub created_at: DateTime<Utc>,
    /// When it was last put.
    pub updated_at: DateTime<Utc>,
}

/// The serde form of a shared value: the value's own (serde's `Arc` impls need its `rc`
/// feature, which every crate of the workspace would then compile with).
mod shared {
    use std::sync::Arc;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub(super) fn serialize<T: Serialize, S: Serializer>(
        value: &Arc<T>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        T::serialize(value, serializer)
    }

    pub(super) fn deserialize<'de, T: Deserialize<'de>, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Arc<T>, D::Error> {
        T::deserialize(deserializer).map(Arc::new)
    }
}

/// An item found by a search, with its relevance when the search had a query.
///
/// Its serde form is the LangGraph API's `SearchItem`: the fields of [`Item`] and `score`
/// (`null` without a query; reading takes a missing `score` as `null`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SearchItem {
    /// The item.
    #[serde(flatten)]
    pub item: Item,
    /// Relevance to the query, higher is better; `None` without a query. By the search's
    /// [`SearchMode`]: similarity (cosine, dot product or negative L2), BM25 score, or the
    /// fused reciprocal-rank score.
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
///
/// Without a `query`, results come newest update first on every backend (across all the
/// namespaces under the prefix; items updated at the same instant, such as the puts of one
/// batch, by namespace and then key). That is the order of LangGraph's SQLite and PostgreSQL
/// stores; its `InMemoryStore` returns insertion order instead, so where a LangGraph guide
/// reads the newest memory as `memories[-1]`, Waypoint's is `memories[0]`. With a `query`,
/// results come best score first.
///
/// Its serde form is the body of the LangGraph API's `POST /store/items/search`:
/// `namespace_prefix`, `filter`, `limit`, `offset`, `query` and `refresh_ttl`. Reading gives
/// missing fields [`SearchOp::new`]'s defaults (a missing or `null` prefix is the root) and
/// refuses unknown fields; writing leaves out the ones that are `None`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SearchOp {
    /// Matches this namespace and its descendants, on whole labels; empty matches all.
    #[serde(deserialize_with = "null_as_default")]
    pub namespace_prefix: Namespace,
    /// Conditions on top-level value keys: `{"k": v}` or `{"k": {"$gt": v}}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filter: Option<Object>,
    /// Page size.
    pub limit: usize,
    /// Items skipped before the page.
    pub offset: usize,
    /// Natural-language query; without one, results are ordered newest update first (see
    /// the type's docs for ties and LangGraph's `InMemoryStore`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    /// Whether to restart the TTL of returned items; `None` uses the store's setting.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refresh_ttl: Option<bool>,
    /// How a query ranks items (a Waypoint extension; left out of the serde form when
    /// [`SearchMode::Vector`], LangGraph's only mode).
    #[serde(skip_serializing_if = "SearchMode::is_vector")]
    pub mode: SearchMode,
}

/// How a search with a query ranks items; lexical and hybrid need
/// [`IndexConfig::lexical`](crate::IndexConfig::lexical).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SearchMode {
    /// By similarity of embeddings; `score` is the similarity.
    #[default]
    Vector,
    /// By BM25 over the indexed fields' words; `score` is the BM25 score, and items sharing
    /// no word with the query are not found.
    Lexical,
    /// Both rankings fused by reciprocal rank fusion (k = 60): `score` is the sum over the
    /// rankings holding the item of `1 / (60 + rank)`, rank from 1, each ranking taken to
    /// depth `max(offset + limit, 100)`.
    Hybrid,
}

impl SearchMode {
    /// Whether this is the default, vector-only mode.
    pub fn is_vector(&self) -> bool {
        *self == SearchMode::Vector
    }
}

/// Reads `null` as the default, for the fields LangGraph's API lets be `null`.
fn null_as_default<'de, D, T>(deserializer: D) -> std::result::Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// Lists the namespaces that hold items.
///
/// Its serde form is the body of the LangGraph API's `POST /store/namespaces`: `prefix`,
/// `suffix`, `max_depth`, `limit` and `offset`. Reading gives missing fields the
/// [`Default`] values and refuses unknown fields; writing leaves out the ones that are `None`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ListNamespacesOp {
    /// Leading labels that must match; `*` matches any one label.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix: Option<Vec<String>>,
    /// Trailing labels that must match; `*` matches any one label.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suffix: Option<Vec<String>>,
    /// Namespaces are cut to this many labels, then de-duplicated.
    #[serde(skip_serializing_if = "Option::is_none")]
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

impl Default for SearchOp {
    fn default() -> Self {
        SearchOp {
            namespace_prefix: Namespace::root(),
            filter: None,
            limit: 10,
            offset: 0,
            query: None,
            refresh_ttl: None,
            mode: SearchMode::Vector,
        }
    }
}

impl SearchOp {
    /// A search of everything under `prefix`: first page of 10, no query, no filter.
    pub fn new(namespace_prefix: impl Into<Namespace>) -> Self {
        SearchOp {
            namespace_prefix: namespace_prefix.into(),
            ..SearchOp::default()
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

    /// Ranks a query's results by `mode` (vector similarity by default).
    pub fn mode(mut self, mode: SearchMode) -> Self {
        self.mode = mode;
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    type TestResult = std::result::Result<(), Box<dyn std::error::Error>>;

    fn time(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .expect("a test time")
            .to_utc()
    }

    fn item() -> Item {
        Item {
            namespace: Namespace::from(["users", "alice"]),
            key: "food".into(),
            value: Arc::new(Object::from_iter([("text".into(), json!("likes ramen"))])),
            created_at: time("2024-07-30T12:00:00Z"),
            updated_at: time("2024-07-30T12:00:01.123456Z"),
        }
    }

    const ITEM: &str = r#""namespace":["users","alice"],"key":"food","value":{"text":"likes ramen"},"created_at":"2024-07-30T12:00:00Z","updated_at":"2024-07-30T12:00:01.123456Z""#;

    #[test]
    fn namespace_json_is_its_list_of_labels() -> TestResult {
        let namespace = Namespace::from(["users", "alice"]);
        assert_eq!(serde_json::to_string(&namespace)?, r#"["users","alice"]"#);
        assert_eq!(
            serde_json::from_str::<Namespace>(r#"["users","alice"]"#)?,
            namespace
        );
        assert!(serde_json::from_str::<Namespace>(r#""users.alice""#).is_err());
        Ok(())
    }

    #[test]
    fn item_json_is_the_langgraph_api_shape() -> TestResult {
        let text = serde_json::to_string(&item())?;
        assert_eq!(text, format!("{{{ITEM}}}"));
        assert_eq!(serde_json::from_str::<Item>(&text)?, item());
        Ok(())
    }

    #[test]
    fn item_json_reads_python_isoformat_times() -> TestResult {
        let python = json!({"namespace": ["users", "alice"], "key": "food",
            "value": {"text": "likes ramen"},
            "created_at": "2024-07-30T14:00:00+02:00",
            "updated_at": "2024-07-30T12:00:01.123456+00:00"});
        assert_eq!(serde_json::from_value::<Item>(python)?, item());
        let naive = json!({"namespace": ["a"], "key": "k", "value": {},
            "created_at": "2024-07-30T12:00:00", "updated_at": "2024-07-30T12:00:00Z"});
        assert!(
            serde_json::from_value::<Item>(naive).is_err(),
            "a time needs its offset"
        );
        Ok(())
    }

    #[test]
    fn search_item_json_is_the_item_and_its_score() -> TestResult {
        let scored = SearchItem {
            item: item(),
            score: Some(0.5),
        };
        let text = serde_json::to_string(&scored)?;
        assert_eq!(text, format!(r#"{{{ITEM},"score":0.5}}"#));
        assert_eq!(serde_json::from_str::<SearchItem>(&text)?, scored);

        let unscored = SearchItem {
            item: item(),
            score: None,
        };
        let text = serde_json::to_string(&unscored)?;
        assert_eq!(text, format!(r#"{{{ITEM},"score":null}}"#));
        assert_eq!(serde_json::from_str::<SearchItem>(&text)?, unscored);
        // langgraph_sdk's `SearchItem` may leave `score` out.
        let without = format!("{{{ITEM}}}");
        assert_eq!(serde_json::from_str::<SearchItem>(&without)?, unscored);
        Ok(())
    }

    #[test]
    fn search_op_json_is_the_langgraph_api_search_body() -> TestResult {
        let op = SearchOp::new(["users"])
            .filter(json!({"kind": "pet"}))
            .limit(5)
            .offset(2)
            .query("cat")
            .refresh_ttl(false);
        let text = serde_json::to_string(&op)?;
        assert_eq!(
            text,
            r#"{"namespace_prefix":["users"],"filter":{"kind":"pet"},"limit":5,"offset":2,"query":"cat","refresh_ttl":false}"#
        );
        assert_eq!(serde_json::from_str::<SearchOp>(&text)?, op);
        let plain = SearchOp::new(["users"]);
        let text = serde_json::to_string(&plain)?;
        assert_eq!(
            text,
            r#"{"namespace_prefix":["users"],"limit":10,"offset":0}"#
        );
        assert_eq!(serde_json::from_str::<SearchOp>(&text)?, plain);
        Ok(())
    }

    #[test]
    fn search_op_json_gives_missing_and_null_fields_their_defaults() -> TestResult {
        let read = serde_json::from_value::<SearchOp>;
        assert_eq!(read(json!({}))?, SearchOp::new(Namespace::root()));
        let nulls = json!({"namespace_prefix": null, "filter": null, "query": null,
            "refresh_ttl": null});
        assert_eq!(read(nulls)?, SearchOp::new(Namespace::root()));
        assert_eq!(
            read(json!({"namespace_prefix": ["users"], "query": "cat"}))?,
            SearchOp::new(["users"]).query("cat")
        );
        Ok(())
    }

    #[test]
    fn search_op_json_refuses_unknown_fields_and_wrong_types() {
        let read = serde_json::from_value::<SearchOp>;
        for bad in [
            json!({"namespace": ["users"]}),
            json!({"filter": "kind = pet"}),
            json!({"limit": -1}),
            json!({"offset": 1.5}),
            json!({"namespace_prefix": "users"}),
        ] {
            assert!(read(bad.clone()).is_err(), "{bad}");
        }
    }

    #[test]
    fn list_namespaces_op_json_is_the_langgraph_api_body() -> TestResult {
        let op = ListNamespacesOp::new()
            .prefix(["users", WILDCARD])
            .suffix(["memories"])
            .max_depth(3)
            .limit(20)
            .offset(1);
        let text = serde_json::to_string(&op)?;
        assert_eq!(
            text,
            r#"{"prefix":["users","*"],"suffix":["memories"],"max_depth":3,"limit":20,"offset":1}"#
        );
        assert_eq!(serde_json::from_str::<ListNamespacesOp>(&text)?, op);
        assert_eq!(
            serde_json::to_string(&ListNamespacesOp::new())?,
            r#"{"limit":100,"offset":0}"#
        );
        assert_eq!(
            serde_json::from_str::<ListNamespacesOp>("{}")?,
            ListNamespacesOp::new()
        );
        assert!(serde_json::from_str::<ListNamespacesOp>(r#"{"depth":3}"#).is_err());
        Ok(())
    }
}
