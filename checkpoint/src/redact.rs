//! Connection URLs with their secrets taken out, for errors, logs and `Debug` output.

/// What a secret is replaced with.
const HIDDEN: &str = "***";

/// Query parameters whose values are secrets (libpq's and Redis clients' names).
const SECRET_PARAMS: &[&str] = &["password", "pass", "sslpassword", "token", "secret"];

/// `url` with its password (and any secret query parameter) replaced by `***`.
///
/// A string that does not parse as a URL is echoed only when it has no `@` and no `=` (no
/// place a secret could hide, like `waypoint.db`); otherwise only its scheme, if it has
/// one, is kept.
pub fn redact_url(url: &str) -> String {
    let parsed = url::Url::parse(url);
    // Opaque forms (`scheme:anything`) have no user or query for the parser to find.
    let Ok(mut parsed) = parsed.ok().filter(|p| !p.cannot_be_a_base()).ok_or(()) else {
        if !url.contains(['@', '=']) {
            return url.to_owned();
        }
        return match url.split_once(':') {
            Some((scheme, _)) if is_scheme(scheme) => format!("{scheme}:<unparsable URL>"),
            _ => "<unparsable URL>".to_owned(),
        };
    };
    if parsed.password().is_some() {
        // Only fails for URLs that cannot have a password, which this one has.
        let _ = parsed.set_password(Some(HIDDEN));
    }
    let secret = |key: &str| SECRET_PARAMS.iter().any(|s| key.eq_ignore_ascii_case(s));
    if parsed.query_pairs().any(|(k, _)| secret(&k)) {
        let pairs: Vec<(String, String)> = parsed
            .query_pairs()
            .map(|(k, v)| {
                let v = if secret(&k) {
                    HIDDEN.to_owned()
                } else {
                    v.into_owned()
                };
                (k.into_owned(), v)
            })
            .collect();
        parsed.query_pairs_mut().clear().extend_pairs(pairs);
    }
    let mut out = parsed.to_string();
    // `url` escapes the asterisks of the placeholder; show them as written.
    out = out.replace("%2A%2A%2A", HIDDEN);
    out
}

fn is_scheme(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

#[cfg(test)]
mod tests {
    use super::redact_url;

    #[test]
    fn passwords_are_hidden() {
        let cases = [
            (
                "postgres://u:hunter2@db:5432/x",
                "postgres://u:***@db:5432/x",
            ),
            (
                "redis://:hunter2@127.0.0.1:6379/0",
                "redis://:***@127.0.0.1:6379/0",
            ),
            ("rediss://user:p%40ss@h/", "rediss://user:***@h/"),
            (
                "postgres://u@h/db?password=hunter2&sslmode=require",
                "postgres://u@h/db?password=***&sslmode=require",
            ),
            ("sqlite:/tmp/a.db", "sqlite:/tmp/a.db"),
            ("postgres://u@h/db", "postgres://u@h/db"),
        ];
        for (url, want) in cases {
            let got = redact_url(url);
            assert_eq!(got, want, "{url}");
            assert!(!got.contains("hunter2") && !got.contains("p%40ss"));
        }
    }

    #[test]
    fn unparsable_urls_are_not_echoed() {
        let got = redact_url("postgres://u:hunter2@[bad");
        assert_eq!(got, "postgres:<unparsable URL>");
        assert_eq!(redact_url("x=hunter2 and more"), "<unparsable URL>");
        assert_eq!(redact_url("u:hunter2@db"), "u:<unparsable URL>");
        assert_eq!(redact_url("sqlite:a.db"), "sqlite:a.db");
        // Nowhere for a secret to hide: shown as given.
        assert_eq!(redact_url("waypoint.db"), "waypoint.db");
        assert_eq!(redact_url("postgres://h:bad/x"), "postgres://h:bad/x");
    }
}
