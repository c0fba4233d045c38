//! Keeping the secrets of connection URLs out of everything the command prints.
//!
//! Messages the command builds itself show URLs through [`redact`]. As a second line of
//! defence, every URL the command was given (on its command line or in a `WAYPOINT_*`
//! environment variable) is remembered at start, and every error, progress line and note passes
//! through [`scrub`], which takes out any of those URLs or their passwords that a library
//! error may have echoed.

use std::sync::{Mutex, PoisonError};
use waypoint_checkpoint::raw::redact_url;

use waypoint_runtime::connect::Backend as Kind;

/// What a secret is replaced with.
const HIDDEN: &str = "***";

/// Secrets shorter than this are replaced only where they sit in a URL (`:pw@`, `=pw`), so a
/// one-letter password does not blank out every such letter of a message.
const SHORT: usize = 4;

/// Query parameters taken as secrets in a URL the `url` crate cannot parse (for parsable
/// URLs, whatever [`redact_url`] hides is a secret).
const SECRET_PARAMS: &[&str] = &["password", "pass", "sslpassword", "token", "secret"];

/// The URLs and secrets remembered so far.
static KNOWN: Mutex<Known> = Mutex::new(Known {
    urls: Vec::new(),
    secrets: Vec::new(),
});

/// Remembered URLs (each with its redacted form) and the secrets in them.
struct Known {
    urls: Vec<(String, String)>,
    secrets: Vec<String>,
}

/// `url` as the command shows it: without its password and secret query parameters
/// (`sqlite:` and `memory:` URLs, which hold none, exactly as given).
pub(crate) fn redact(url: &str) -> String {
    match Kind::of(url) {
        Ok(Kind::Sqlite | Kind::Memory) => url.to_owned(),
        _ => redact_url(url),
    }
}

/// Remembers the URLs in this process's arguments and `WAYPOINT_*` environment variables.
pub(crate) fn remember_from_environment() {
    for arg in std::env::args_os().skip(1) {
        let arg = arg.to_string_lossy();
        // `--url=postgres://...` as well as `postgres://...`.
        let value = match arg.strip_prefix("--") {
            Some(option) => option.split_once('=').map_or(arg.as_ref(), |(_, v)| v),
            None => arg.as_ref(),
        };
        remember(value);
    }
    for (name, value) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("WAYPOINT_") {
            remember(&value.to_string_lossy());
        }
    }
}

/// Remembers `text` if it looks like a URL with a secret in it, so [`scrub`] takes the secret
/// out wherever it shows up.
pub(crate) fn remember(text: &str) {
    let secrets = secrets_of(text);
    if secrets.is_empty() {
        return;
    }
    let mut known = KNOWN.lock().unwrap_or_else(PoisonError::into_inner);
    if !known.urls.iter().any(|(url, _)| url == text) {
        known.urls.push((text.to_owned(), redact_url(text)));
        known
            .urls
            .sort_by_key(|(url, _)| std::cmp::Reverse(url.len()));
    }
    for secret in secrets {
        if !known.secrets.contains(&secret) {
            known.secrets.push(secret);
        }
    }
    known.secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
}

/// `text` with every remembered URL redacted and every remembered secret replaced by `***`.
pub(crate) fn scrub(text: &str) -> String {
    let known = KNOWN.lock().unwrap_or_else(PoisonError::into_inner);
    let mut out = text.to_owned();
    for (url, redacted) in &known.urls {
        if out.contains(url.as_str()) {
            out = out.replace(url.as_str(), redacted);
        }
    }
    for secret in &known.secrets {
        if secret.len() >= SHORT {
            out = out.replace(secret.as_str(), HIDDEN);
        } else {
            for (before, after) in [(":", "@"), ("=", "&"), ("=", " "), ("=", "`")] {
                out = out.replace(
                    &format!("{before}{secret}{after}"),
                    &format!("{before}{HIDDEN}{after}"),
                );
            }
            if let Some(head) = out.strip_suffix(secret.as_str())
                && head.ends_with('=')
            {
                out = format!("{head}{HIDDEN}");
            }
        }
    }
    out
}

/// The secrets in `text` read as a URL, each as written and percent-decoded; none when it is
/// not a URL with a password or a secret query parameter.
fn secrets_of(text: &str) -> Vec<String> {
    let Some((_, rest)) = text.split_once("://") else {
        return Vec::new();
    };
    let mut found = Vec::new();
    match url::Url::parse(text) {
        Ok(parsed) => {
            if let Some(password) = parsed.password() {
                found.push(password.to_owned());
            }
            // What redact_url hides among the query's values is a secret.
            if let (Some(query), Ok(redacted)) =
                (parsed.query(), url::Url::parse(&redact_url(text)))
            {
                let hidden = redacted.query().unwrap_or_default();
                for (pair, shown) in query.split('&').zip(hidden.split('&')) {
                    if pair != shown
                        && let Some((_, value)) = pair.split_once('=')
                    {
                        found.push(value.to_owned());
                    }
                }
            }
        }
        Err(_) => {
            // Cannot be taken apart properly: take everything that could be a secret.
            let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
            let userinfo = rest.rsplit_once('@').map(|(u, _)| u);
            for info in [userinfo, authority.rsplit_once('@').map(|(u, _)| u)]
                .into_iter()
                .flatten()
            {
                if let Some((_, password)) = info.split_once(':') {
                    found.push(password.to_owned());
                }
            }
            for pair in rest.split(['?', '&', '#']).skip(1) {
                if let Some((key, value)) = pair.split_once('=')
                    && SECRET_PARAMS.iter().any(|s| key.eq_ignore_ascii_case(s))
                {
                    found.push(value.to_owned());
                }
            }
        }
    }
    let decoded: Vec<String> = found
        .iter()
        .map(|s| {
            url::form_urlencoded::parse(format!("x={s}").as_bytes())
                .next()
                .map_or_else(|| s.clone(), |(_, v)| v.into_owned())
        })
        .collect();
    found.extend(decoded);
    found.retain(|s| !s.is_empty() && s != HIDDEN);
    found.sort();
    found.dedup();
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_found_in_every_form() {
        assert_eq!(secrets_of("postgres://u:hunter2@h/db"), ["hunter2"]);
        assert_eq!(
            secrets_of("postgres://u@h/db?sslmode=require&password=hun%20ter2"),
            ["hun ter2", "hun%20ter2"]
        );
        assert_eq!(secrets_of("redis://:p%40ss@h:1/"), ["p%40ss", "p@ss"]);
        // Unparsable: the whole userinfo's password part, however odd.
        assert!(secrets_of("postgres://u:hun/ter2@h/db").contains(&"hun/ter2".to_owned()));
        assert!(secrets_of("postgres://u:hunter2@[bad/db").contains(&"hunter2".to_owned()));
        assert!(secrets_of("postgres://u@h/db").is_empty());
        assert!(secrets_of("sqlite:/tmp/a.db").is_empty());
        assert!(secrets_of("threads").is_empty());
    }

    #[test]
    fn scrub_takes_remembered_secrets_out() {
        remember("postgres://u:correct-horse@h:5432/db");
        remember("redis://:pw@h:6379/");
        let line = "cannot connect to postgres://u:correct-horse@h:5432/db (password \
                    correct-horse rejected); redis://:pw@h:6379/ and redis://:pw@other/";
        let scrubbed = scrub(line);
        assert!(!scrubbed.contains("correct-horse"), "{scrubbed}");
        assert!(!scrubbed.contains(":pw@"), "{scrubbed}");
        assert!(
            scrubbed.contains("postgres://u:***@h:5432/db"),
            "{scrubbed}"
        );
        // A short secret is left alone outside a URL.
        assert_eq!(scrub("a pwd"), "a pwd");
    }

    #[test]
    fn redaction_keeps_sqlite_paths_as_given() {
        assert_eq!(redact("sqlite:my file.db"), "sqlite:my file.db");
        assert_eq!(
            redact("postgres://u@h/db?password=hunter2"),
            "postgres://u@h/db?password=***"
        );
        assert_eq!(
            redact("postgres://u:hunter2@[bad"),
            "postgres:<unparsable URL>"
        );
    }
}
