//! Every read option, declared once: its key, the values it takes, its default, the
//! environment variable the CLI and Python read it from, where it can be given (table
//! options, `SET zarrow.<key>`, Python keywords) and one line of documentation.
//!
//! The parsers ([`crate::table::TableOptions::set`], the remote, limit and fetch options'
//! `set`), the lists of valid keys in error messages, the DataFusion session settings, the
//! Python keywords checked for misuse, the environment the edges read and the page
//! `docs/options.md` all come from [`OPTION_KEYS`].

/// Which options type a key sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    /// How arrays become columns: [`crate::table::TableOptions`] and its reader options.
    Table,
    /// Timeouts, retries and versions of remote stores and repositories
    /// ([`crate::RemoteOptions`]); also given as store options.
    Remote,
    /// What zarrow allocates at most ([`crate::ReadLimits`]).
    Limit,
    /// How chunk reads are split and merged ([`crate::FetchOptions`]).
    Fetch,
    /// A setting of the DataFusion session only (`SET zarrow.<key>`), not of a table.
    Session,
    /// An option of a table that is written to (`INSERT INTO`), not of its reads.
    Write,
}

/// Where a key can be given besides the CLI's `--option key=value`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scope {
    /// A table option: `OPTIONS (…)`, `register_zarr`, `FROM 'location'` (through the
    /// session).
    pub table: bool,
    /// A session setting: `SET zarrow.<key>`, the default of every table created afterwards.
    pub session: bool,
    /// How Python's reading functions take it: a keyword, or inside `storage_options`.
    pub python: PythonArg,
}

/// How Python's reading functions take a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PythonArg {
    /// A keyword argument of the same name.
    Keyword,
    /// A key of `storage_options`.
    StorageOption,
    /// Only from the environment variable.
    Environment,
    /// Not at all (SQL only).
    No,
}

/// One option.
#[derive(Debug, Clone, Copy)]
pub struct OptionKey {
    /// The key, as table options, settings and `--option` spell it.
    pub key: &'static str,
    /// The options type it sets.
    pub group: Group,
    /// The values it takes, in words (`bytes`, `true`/`false`, …).
    pub values: &'static str,
    /// Its default, as it would be written (empty: none).
    pub default: &'static str,
    /// The environment variable the CLI and Python read it from.
    pub env: Option<&'static str>,
    /// Where it can be given.
    pub scope: Scope,
    /// What it does, in one line (Markdown).
    pub doc: &'static str,
}

const TABLE_AND_SESSION: Scope = Scope {
    table: true,
    session: true,
    python: PythonArg::Keyword,
};
/// A table option only: it names members or columns of one table.
const TABLE_ONLY: Scope = Scope {
    table: true,
    session: false,
    python: PythonArg::Keyword,
};
const REMOTE: Scope = Scope {
    table: true,
    session: true,
    python: PythonArg::StorageOption,
};
const LIMIT: Scope = Scope {
    table: true,
    session: true,
    python: PythonArg::Environment,
};

/// Every read option (see the module docs).
pub const OPTION_KEYS: &[OptionKey] = &[
    OptionKey {
        key: "string_type",
        group: Group::Table,
        values: "`utf8`, `large_utf8`, `view`",
        default: "utf8",
        env: None,
        scope: TABLE_AND_SESSION,
        doc: "the Arrow type of strings (bytes follow: Binary, LargeBinary, BinaryView)",
    },
    OptionKey {
        key: "fill_as_null",
        group: Group::Table,
        values: "`true`/`false`",
        default: "false",
        env: None,
        scope: TABLE_AND_SESSION,
        doc: "elements equal to the array's fill value become NULL",
    },
    OptionKey {
        key: "decode_cf",
        group: Group::Table,
        values: "`true`/`false`",
        default: "false",
        env: None,
        scope: TABLE_AND_SESSION,
        doc: "apply the CF conventions: time units → Timestamp, `scale_factor`/`add_offset`, \
              `_FillValue`/`missing_value` → NULL ([tables.md](tables.md#xarray-datasets-and-the-cf-conventions))",
    },
    OptionKey {
        key: "arrays",
        group: Group::Table,
        values: "array names, comma-separated",
        default: "",
        env: None,
        scope: TABLE_ONLY,
        doc: "build a group's table from these child arrays only (coordinates of its \
              dimensions are added)",
    },
    OptionKey {
        key: "dictionary",
        group: Group::Table,
        values: "column names, comma-separated",
        default: "",
        env: None,
        scope: TABLE_ONLY,
        doc: "read these string or binary columns as Arrow dictionaries (`Int32` keys into each \
              batch's distinct values; polars `Categorical`, pandas `category`) \
              ([tables.md](tables.md#dictionary-columns))",
    },
    OptionKey {
        key: "concurrency",
        group: Group::Table,
        values: "a number, at least 1",
        default: "32",
        env: None,
        scope: Scope {
            table: false,
            session: true,
            python: PythonArg::No,
        },
        doc: "chunk reads in flight at once per partition (local files: one chunk ahead, more only while the decoder waits for bytes)",
    },
    OptionKey {
        key: "connect_timeout",
        group: Group::Remote,
        values: "a duration: `500ms`, `5s`, `2m`, seconds",
        default: "5s",
        env: Some("ZARROW_CONNECT_TIMEOUT"),
        scope: REMOTE,
        doc: "remote stores: how long a connection may take ([stores.md](stores.md#timeouts-and-retries))",
    },
    OptionKey {
        key: "timeout",
        group: Group::Remote,
        values: "a duration",
        default: "30s",
        env: Some("ZARROW_TIMEOUT"),
        scope: REMOTE,
        doc: "remote stores: how long one read may take, retries and bodies included",
    },
    OptionKey {
        key: "max_retries",
        group: Group::Remote,
        values: "a number",
        default: "3",
        env: Some("ZARROW_MAX_RETRIES"),
        scope: REMOTE,
        doc: "remote stores: how many times a failing request is retried",
    },
    OptionKey {
        key: "retry_timeout",
        group: Group::Remote,
        values: "a duration",
        default: "20s",
        env: Some("ZARROW_RETRY_TIMEOUT"),
        scope: REMOTE,
        doc: "remote stores: for how long a request is retried (within `timeout`)",
    },
    OptionKey {
        key: "warm_connections",
        group: Group::Remote,
        values: "a number, at most 256",
        default: "32",
        env: Some("ZARROW_WARM_CONNECTIONS"),
        scope: REMOTE,
        doc: "remote stores: connections a fresh store opens while its first metadata \
              document is on the way; `0`: none ([stores.md](stores.md#how-chunks-are-requested))",
    },
    OptionKey {
        key: "ref",
        group: Group::Remote,
        values: "a branch, tag or snapshot id",
        default: "main",
        env: None,
        scope: TABLE_AND_SESSION,
        doc: "Icechunk repositories: the version read (`@REF` in the location wins); \
              plain stores refuse it as a table option and ignore the setting ([icechunk.md](icechunk.md))",
    },
    OptionKey {
        key: "virtual_chunks",
        group: Group::Remote,
        values: "URL prefixes, comma-separated, or `*`",
        default: "",
        env: None,
        scope: REMOTE,
        doc: "Icechunk repositories: the containers virtual chunks may be read from (none by default)",
    },
    OptionKey {
        key: "max_item_bytes",
        group: Group::Limit,
        values: "bytes",
        default: "16777216",
        env: Some("ZARROW_MAX_ITEM_BYTES"),
        scope: LIMIT,
        doc: "the largest element (string, bytes, fixed-size item) read, 16 MiB; at most \
              2147483647 ([reliability.md](reliability.md))",
    },
    OptionKey {
        key: "max_chunk_bytes",
        group: Group::Limit,
        values: "bytes",
        default: "2147483648",
        env: Some("ZARROW_MAX_CHUNK_BYTES"),
        scope: LIMIT,
        doc: "the largest decoded variable-length chunk read, 2 GiB",
    },
    OptionKey {
        key: "max_metadata_bytes",
        group: Group::Limit,
        values: "bytes",
        default: "268435456",
        env: Some("ZARROW_MAX_METADATA_BYTES"),
        scope: LIMIT,
        doc: "the largest metadata document read, 256 MiB",
    },
    OptionKey {
        key: "range_split_bytes",
        group: Group::Fetch,
        values: "bytes",
        default: "8388608",
        env: None,
        scope: TABLE_AND_SESSION,
        doc: "a chunk (or inner chunk) larger than this, 8 MiB, is read as ranged GETs of this \
              size, up to `concurrency` at once, into one buffer; `0`: never split \
              ([stores.md](stores.md#how-chunks-are-requested))",
    },
    OptionKey {
        key: "coalesce_bytes",
        group: Group::Fetch,
        values: "bytes",
        default: "1048576",
        env: None,
        scope: TABLE_AND_SESSION,
        doc: "inner chunks of one shard at most this far apart, 1 MiB, are read by one GET",
    },
    OptionKey {
        key: "runtime_pruning",
        group: Group::Session,
        values: "`true`/`false`",
        default: "true",
        env: None,
        scope: Scope {
            table: false,
            session: true,
            python: PythonArg::No,
        },
        doc: "skip chunks by the filters a query learns as it runs: joins, `IN (SELECT …)`, \
              `ORDER BY … LIMIT` ([sql.md](sql.md#pruning-at-planning-and-at-run-time))",
    },
    OptionKey {
        key: "break_stale_lock",
        group: Group::Write,
        values: "`true`/`false`",
        default: "false",
        env: None,
        scope: Scope {
            table: true,
            session: false,
            python: PythonArg::No,
        },
        doc: "`INSERT INTO` the table breaks a stale writer lock (its process gone on this \
              host, or older than an hour; [writing.md](writing.md#write-safety))",
    },
];

/// The declaration of `key`.
pub fn option_key(key: &str) -> Option<&'static OptionKey> {
    OPTION_KEYS.iter().find(|o| o.key == key)
}

/// The keys of `group`, in declaration order.
pub fn keys_of(group: Group) -> impl Iterator<Item = &'static str> {
    OPTION_KEYS
        .iter()
        .filter(move |o| o.group == group)
        .map(|o| o.key)
}

/// The keys a table takes (`OPTIONS (…)`), comma-separated: what an error for an unknown key
/// lists.
pub fn table_keys() -> String {
    let keys: Vec<&str> = OPTION_KEYS
        .iter()
        .filter(|o| o.scope.table)
        .map(|o| o.key)
        .collect();
    keys.join(", ")
}

/// Whether a text is a boolean option's `true` or `false` (also `1`/`0`, `yes`/`no`,
/// `on`/`off`); an error names the key.
pub fn parse_bool(key: &str, value: &str) -> crate::Result<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Ok(true),
        "false" | "0" | "no" | "off" => Ok(false),
        other => Err(crate::Error::invalid_option(
            key,
            format!("expected true or false, found '{other}'"),
        )),
    }
}

/// The `(key, value)` of every option whose environment variable is set and not blank (read
/// limits and remote settings): what the CLI and Python start their options from. Only the
/// edges call this: the library reads no `ZARROW_*` variable on its own.
pub fn env_options() -> Vec<(String, String)> {
    env_values(|_| true)
}

/// [`env_options`] of the keys `keep` takes, with the variable each came from.
pub(crate) fn env_values(keep: impl Fn(&OptionKey) -> bool) -> Vec<(String, String)> {
    OPTION_KEYS
        .iter()
        .filter(|o| keep(o))
        .filter_map(|o| {
            let value = std::env::var(o.env?)
                .ok()
                .filter(|v| !v.trim().is_empty())?;
            Some((o.key.to_string(), value))
        })
        .collect()
}

/// The page `docs/options.md`: every option in one table, made from [`OPTION_KEYS`].
pub fn options_page() -> String {
    let mut page = String::from(
        "# Options\n\n\
         <!-- Generated from crates/zarrow/src/options/keys.rs by \
         `ZARROW_WRITE_OPTIONS_PAGE=1 cargo test -p zarrow --lib options_page`; \
         a test fails when this page and the declaration differ. -->\n\n\
         Every read option of zarrow. Each is given as a table option (`OPTIONS (key 'value')` \
         in `CREATE EXTERNAL TABLE`, `register_zarr`'s `ZarrTableOptions`, the CLI's \
         `--option key=value`), as a session setting (`SET zarrow.key = 'value'`, the default \
         of every table created afterwards, `FROM 'location'` tables included), or from Python \
         as the column *Python* says. Keys may carry a `format.` or `zarrow.` prefix; an \
         unknown key is an error that lists these. Booleans also take `1`/`0`, `yes`/`no`, \
         `on`/`off`. Environment variables are read by the CLI and the Python package only; \
         an option given wins over its variable. The options of writing are in \
         [writing.md](writing.md#options).\n\n\
         | key | values | default | table | `SET zarrow.` | environment | Python | what |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for o in OPTION_KEYS {
        let yes = |b: bool| if b { "yes" } else { "" };
        let default = if o.default.is_empty() {
            "none".to_string()
        } else {
            format!("`{}`", o.default)
        };
        let env = o.env.map(|e| format!("`{e}`")).unwrap_or_default();
        let python = match o.scope.python {
            PythonArg::Keyword => format!("`{}=`", o.key),
            PythonArg::StorageOption => "`storage_options`".to_string(),
            PythonArg::Environment => "environment".to_string(),
            PythonArg::No => String::new(),
        };
        page.push_str(&format!(
            "| `{}` | {} | {default} | {} | {} | {env} | {python} | {} |\n",
            o.key,
            o.values,
            yes(o.scope.table),
            yes(o.scope.session),
            o.doc
        ));
    }
    page.push_str(
        "\nThe DataFusion settings that shape a zarr scan are \
         `datafusion.execution.target_partitions` (how many partitions a scan is split into; \
         default: the number of cores) and `datafusion.execution.batch_size` (rows per batch).\n",
    );
    page
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::TableOptions;

    /// `docs/options.md` is this declaration's page; `ZARROW_WRITE_OPTIONS_PAGE=1` writes it.
    #[test]
    fn options_page_is_the_declaration() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/options.md");
        let page = options_page();
        if std::env::var_os("ZARROW_WRITE_OPTIONS_PAGE").is_some() {
            std::fs::write(&path, &page).unwrap();
        }
        let written = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            written == page,
            "docs/options.md differs from crates/zarrow/src/options/keys.rs: run \
             `ZARROW_WRITE_OPTIONS_PAGE=1 cargo test -p zarrow --lib options_page`"
        );
    }

    /// Each declared default is the default: setting it changes nothing.
    #[test]
    fn declared_defaults_are_the_defaults() {
        for o in OPTION_KEYS.iter().filter(|o| !o.default.is_empty()) {
            let mut set = TableOptions::default();
            match o.group {
                Group::Session | Group::Write => {
                    assert_eq!(parse_bool(o.key, o.default).unwrap(), o.default == "true");
                    continue;
                }
                Group::Remote if o.key == "ref" => continue,
                _ => set.set(o.key, o.default).unwrap(),
            }
            let default = TableOptions::default();
            #[cfg(feature = "cloud")]
            let same_remote = set.remote.resolve() == default.remote.resolve();
            #[cfg(not(feature = "cloud"))]
            let same_remote = true;
            set.remote = default.remote.clone();
            assert!(set == default && same_remote, "{}: {set:?}", o.key);
        }
    }

    /// Every key parses where it is declared, and an unknown key's error lists the valid ones.
    #[test]
    fn every_key_is_parsed() {
        let mut table = TableOptions::default();
        for o in OPTION_KEYS.iter().filter(|o| o.group != Group::Session) {
            if o.group == Group::Write {
                continue;
            }
            let value = match o.key {
                "string_type" => "large_utf8",
                "arrays" | "dictionary" => "a,b",
                "ref" => "v1",
                "virtual_chunks" => "*",
                k if k.ends_with("timeout") => "2s",
                k if o.values.contains("true") => {
                    assert!(table.set(k, "maybe").is_err(), "{k}");
                    "true"
                }
                _ => "7",
            };
            table.set(o.key, value).unwrap();
            // Names and versions are any text; every other value is checked, naming its key.
            if !matches!(o.key, "arrays" | "dictionary" | "virtual_chunks" | "ref") {
                let err = table.set(o.key, "∞").unwrap_err().to_string();
                assert!(err.contains(o.key), "{err}");
            }
        }
        let err = table.set("concurrncy", "1").unwrap_err().to_string();
        assert!(err.contains(&table_keys()), "{err}");
    }
}
