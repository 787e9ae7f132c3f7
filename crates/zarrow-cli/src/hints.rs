//! Hints printed under an error where a common mistake is likely: a group of groups queried as a
//! table, a column name that differs only in case, a zarr location given as a table name or
//! without `STORED AS ZARR`, an AnnData dataframe whose attributes do not match its members.

/// Lines DataFusion puts under some messages that the hints say in one line instead.
const DROPPED_LINES: &[&str] = &["Column names are case sensitive", "Valid fields are "];

/// A message without the continuation lines [`hints`] replaces.
pub(crate) fn tidy(message: &str) -> String {
    let mut lines = message.lines();
    let first = lines.next().unwrap_or_default().to_string();
    lines
        .filter(|l| !DROPPED_LINES.iter().any(|d| l.starts_with(d)))
        .fold(first, |acc, l| acc + "\n" + l)
}

/// The hints for an error whose chain reads `text` (its messages joined).
pub(crate) fn hints(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(hint) = group_of_groups(text) {
        out.push(hint);
    }
    if let Some(hint) = column_case(text) {
        out.push(hint);
    }
    if text.contains("Missing STORED AS clause in CREATE EXTERNAL TABLE") {
        out.push(
            "a zarr array or group is registered with CREATE EXTERNAL TABLE t STORED AS ZARR \
             LOCATION '…' (or queried in place: SELECT … FROM '<location>')"
                .into(),
        );
    }
    if let Some(hint) = location_as_name(text) {
        out.push(hint);
    }
    if text.contains("sql parser error: Expected: end of statement, found: /") {
        out.push("a location goes in single quotes: SELECT … FROM 'path/to/store.zarr'".into());
    }
    if text.contains("No files found at ") && text.contains(".zarr") {
        out.push("for a zarr location use STORED AS ZARR".into());
    }
    if text.contains("which the group does not hold")
        || text.contains("(the group says it is an AnnData dataframe)")
    {
        out.push(
            "the dataframe's attributes do not match what it holds (anndata cannot read it \
             either): zarrow tree on its location lists what it holds"
                .into(),
        );
    }
    out
}

/// `group 'P' holds no arrays to read as a table (children: a, b)` → query a child.
fn group_of_groups(text: &str) -> Option<String> {
    let rest = text.split("group '").nth(1)?;
    let (path, rest) = rest.split_once("' holds no arrays to read as a table (children: ")?;
    let children: Vec<&str> = rest.split(')').next()?.split(", ").collect();
    let first = children.first()?;
    Some(format!(
        "'{path}' is a group of groups ({}): query one of them, e.g. SELECT * FROM '{}/{first}'",
        children.join(", "),
        path.trim_end_matches('/')
    ))
}

/// `No field named "Name". … Valid fields are t.name, …` where a valid field differs only in
/// case → its real name, quoted if it has capitals.
fn column_case(text: &str) -> Option<String> {
    let asked = text.split("No field named ").nth(1)?;
    let asked = asked
        .split(|c: char| c.is_whitespace())
        .next()?
        .trim_end_matches('.');
    let asked = unquote(asked.rsplit('.').next()?);
    let valid = text.split("Valid fields are ").nth(1)?;
    let valid = valid.lines().next()?.trim_end_matches('.');
    let real = valid
        .split(", ")
        .map(|f| unquote(f.rsplit('.').next().unwrap_or(f)))
        .find(|f| f != &asked && f.eq_ignore_ascii_case(&asked))?;
    Some(if real.chars().any(|c| c.is_uppercase()) {
        format!(
            "the column is \"{real}\": quote it with double quotes (unquoted names are lower-cased)"
        )
    } else {
        format!("the column is {real} (column names are case-sensitive)")
    })
}

/// `table 'datafusion.public.data/x.zarr' not found` or `table 'datafusion.x.zarr' not found`:
/// a location in double quotes or unquoted.
fn location_as_name(text: &str) -> Option<String> {
    let rest = text.split("table '").nth(1)?;
    let (name, _) = rest.split_once("' not found")?;
    // `FROM store.zarr` unquoted reads as schema `store`, table `zarr`
    let name = name
        .strip_prefix("datafusion.public.")
        .or_else(|| name.strip_prefix("datafusion."))
        .unwrap_or(name)
        .to_string();
    let looks_like_location = name.contains('/')
        || name.contains("://")
        || name.ends_with(".zarr")
        || std::path::Path::new(&name).exists();
    looks_like_location.then(|| {
        format!(
            "'{name}' looks like a zarr location: SELECT … FROM '{name}' (single quotes) works \
             for zarr; for CREATE EXTERNAL TABLE add STORED AS ZARR"
        )
    })
}

fn unquote(s: &str) -> String {
    s.trim_matches(|c| c == '"' || c == '\'').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hints_for_common_mistakes() {
        let h = hints("invalid argument: group 'a.zarr/uns' holds no arrays to read as a table (children: rank, pca)");
        assert_eq!(
            h,
            vec!["'a.zarr/uns' is a group of groups (rank, pca): query one of them, e.g. SELECT * FROM 'a.zarr/uns/rank'"]
        );
        let h = hints("Schema error: No field named \"Cell_Type\". Did you mean 't.cell_type'?\nValid fields are t.barcode, t.cell_type.");
        assert_eq!(
            h,
            vec!["the column is cell_type (column names are case-sensitive)"]
        );
        let h = hints("Schema error: No field named name. Valid fields are \"t\".\"Name\", t.x.");
        assert_eq!(
            h,
            vec!["the column is \"Name\": quote it with double quotes (unquoted names are lower-cased)"]
        );
        assert!(hints("Schema error: No field named nope. Valid fields are t.x.").is_empty());
        let h = hints("Error during planning: table 'datafusion.public.data/x.zarr/obs' not found");
        assert!(h[0].contains("FROM 'data/x.zarr/obs'"), "{h:?}");
        assert!(hints("Error during planning: table 'datafusion.public.obs' not found").is_empty());
        let h = hints("Error during planning: table 'datafusion.pbmc.zarr' not found");
        assert!(h[0].starts_with("'pbmc.zarr' looks like"), "{h:?}");
        for invalid in [
            "invalid metadata for 'a.zarr/obs' (column-order): names the column 'gone', which \
             the group does not hold",
            "invalid metadata for 'a.zarr/obs' (_index): no such attribute, naming the index \
             column (the group says it is an AnnData dataframe)",
        ] {
            let h = hints(invalid);
            assert!(h.len() == 1 && h[0].contains("zarrow tree"), "{h:?}");
        }
        assert_eq!(
            tidy("No field named a.\nColumn names are case sensitive. x\nValid fields are b."),
            "No field named a."
        );
    }
}
