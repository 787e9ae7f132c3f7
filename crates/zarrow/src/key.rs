//! Store keys of zarr nodes: the one place an object path is made from node names.
//!
//! Zarr stores a node under its names as they are: the v3 spec's keys are the node's path, its
//! names joined by `/`, each any Unicode string but `/` (v2 likewise). zarr-python, zarrs,
//! tensorstore and xarray write an array named `température` or `a#b` under
//! `température/zarr.json` and `a#b/c/0`. `object_store` can hold such a key, but its
//! `Path::from` and `Path::join` percent-encode non-ASCII and `%#{}[]^~|<>"\`*?` on the way in
//! (`temp%C3%A9rature`), which on a local disk, S3 or HTTP names a different object. So every
//! key goes through [`join`] (names as they are) and every location's path through
//! [`from_url_path`] (a URL's path decoded once).
//!
//! A name `object_store` cannot hold as it is — `.`, `..` or one with a control character —
//! keeps `object_store`'s encoding: it never climbs out of the store and names no object a
//! zarr writer made. The writer refuses such names before it writes (`write::check_name`).

use object_store::path::{Path, PathPart};

/// `relative` (names separated by `/`; empty names are skipped) below `base`, each name as it
/// is.
///
/// ```
/// use object_store::path::Path;
/// use zarrow::key;
///
/// let root = key::from_url_path("data/t%C3%A9.zarr").unwrap();
/// assert_eq!(key::join(&root, "température/c/0").as_ref(), "data/té.zarr/température/c/0");
/// assert_eq!(key::join(&Path::default(), "a#b/x%y/zarr.json").as_ref(), "a#b/x%y/zarr.json");
/// // A name that would climb out of the store is never taken as it is.
/// assert_eq!(key::join(&root, "../x").as_ref(), "data/té.zarr/%2E%2E/x");
/// ```
pub fn join(base: &Path, relative: &str) -> Path {
    let mut path = base.clone();
    for name in relative.split('/').filter(|n| !n.is_empty()) {
        path = path.join(part(name));
    }
    path
}

/// One name as a path part: as it is where `object_store` can hold it, else encoded.
fn part(name: &str) -> PathPart<'_> {
    PathPart::parse(name).unwrap_or_else(|_| PathPart::from(name))
}

/// The path of a URL's (percent-encoded) path: `/a/t%C3%A9/` is `a/té`. Also a plain path
/// without escapes (`s/v`). `Err` names why: not UTF-8 once decoded, an empty name (`a//b`),
/// or a name `object_store` cannot hold (`..`, a control character).
pub fn from_url_path(path: &str) -> Result<Path, String> {
    Path::from_url_path(path.trim_matches('/')).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Names in several scripts, with spaces and with every ASCII punctuation mark a node name
    /// may hold (all but `/`): each is one path part, as it is.
    #[test]
    fn names_are_kept_as_they_are() {
        let punctuation: String = (b'!'..=b'~')
            .map(char::from)
            .filter(|c| c.is_ascii_punctuation() && *c != '/')
            .collect();
        let names = [
            "température",
            "日本",
            "данные",
            "ἀρχή",
            "🧬 cells",
            "my col",
            "a+b",
            "a#b",
            "x%y",
            "x%41",
            "%2E%2E",
            ".hidden",
            punctuation.as_str(),
        ];
        for name in names {
            let path = join(&Path::default(), &format!("{name}/c/0"));
            assert_eq!(path.as_ref(), format!("{name}/c/0"), "{name}");
            let parts: Vec<_> = path.parts().collect();
            assert_eq!(parts[0].as_ref(), name);
        }
    }

    #[test]
    fn names_that_climb_or_hold_control_characters_never_match_as_they_are() {
        let root = Path::from("r");
        assert_eq!(join(&root, "../..").as_ref(), "r/%2E%2E/%2E%2E");
        assert_eq!(join(&root, "./a").as_ref(), "r/%2E/a");
        assert_eq!(join(&root, "a\nb").as_ref(), "r/a%0Ab");
        assert_eq!(join(&root, "//a//b/").as_ref(), "r/a/b");
    }

    #[test]
    fn url_paths_are_decoded_once() {
        let path = from_url_path("/bucket/t%C3%A9.zarr/x%2541/").unwrap();
        assert_eq!(path.as_ref(), "bucket/té.zarr/x%41");
        assert_eq!(from_url_path("").unwrap(), Path::default());
        assert!(from_url_path("a/%2E%2E/b").is_err());
        assert!(from_url_path("a/%FF").is_err());
    }
}
