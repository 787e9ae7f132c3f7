//! Icechunk repositories and plain zarr stores on Azure Blob Storage and Google Cloud Storage,
//! against the emulators `tests/remote/start.sh` starts on loopback: Azurite
//! (`ZARROW_TEST_AZURE`) and fake-gcs-server (`ZARROW_TEST_GCS`), each holding the fixtures
//! (`zarrow-fixtures`). Everything goes through SQL, with the credentials and endpoints
//! `start.sh` exports as a user would (`AZURE_STORAGE_ACCOUNT_NAME`, `AZURE_STORAGE_USE_EMULATOR`,
//! `AZURITE_BLOB_STORAGE_URL`, `GOOGLE_BASE_URL`, …).
//!
//! Azure: `COPY` creates a repository in one commit, `INSERT INTO` appends in another, both
//! report their snapshot, and the first snapshot still reads as the first table. GCS: reads
//! only: fake-gcs-server does not take `object_store`'s uploads (XML API `PUT`s), so writes to
//! GCS have no emulator to run against here.
//!
//! Without a server the tests skip with a message, except under CI (`CI=true`), where they fail.

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::DataType;
use datafusion::prelude::SessionContext;
use serde_json::Value;
use zarrow_testkit::{optional_loopback, unique_name};

use crate::common::data_dir;

/// The one batch `sql` answers (its batches concatenated).
async fn query(ctx: &SessionContext, sql: &str) -> RecordBatch {
    let df = ctx.sql(sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    let schema = df.schema().inner().clone();
    let batches = df.collect().await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    let schema = batches.first().map_or(schema, |b| b.schema());
    arrow::compute::concat_batches(&schema, &batches).unwrap()
}

/// A column's values as text (`None` for null), whatever its string or integer type.
fn strings(batch: &RecordBatch, column: &str) -> Vec<Option<String>> {
    let column = batch
        .column_by_name(column)
        .unwrap_or_else(|| panic!("no column {column} in {:?}", batch.schema()));
    let text = arrow::compute::cast(column, &DataType::Utf8).unwrap();
    let text = text.as_string::<i32>();
    (0..text.len())
        .map(|i| text.is_valid(i).then(|| text.value(i).to_string()))
        .collect()
}

/// `(count, snapshot_id)` of a write's one-row answer.
fn written(batch: &RecordBatch) -> (String, String) {
    assert_eq!(batch.num_rows(), 1, "{batch:?}");
    let count = strings(batch, "count")[0].clone().unwrap();
    let snapshot = strings(batch, "snapshot_id")[0]
        .clone()
        .expect("an Icechunk write reports its snapshot");
    (count, snapshot)
}

fn texts(values: &[Option<&str>]) -> Vec<Option<String>> {
    values.iter().map(|v| v.map(str::to_string)).collect()
}

/// The fixture repository's `labels` at `v1` and `main`, read from `repository` (its
/// location without `@REF`), against the answers of icechunk's own reader; then the plain
/// fixture store's `obs` at `plain` against anndata's.
async fn read_fixtures(repository: &str, plain: &str) {
    let want: Value =
        serde_json::from_slice(&std::fs::read(data_dir().join("expected_icechunk.json")).unwrap())
            .unwrap();
    let ctx = zarrow_datafusion::zarr_session_context(Default::default());
    for version in ["v1", "main"] {
        let sql = format!("SELECT * FROM '{repository}@{version}/labels'");
        let got = strings(&query(&ctx, &sql).await, "labels");
        let expected: Vec<Option<String>> = want["versions"][version]["labels"]["values"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().map(str::to_string))
            .collect();
        assert_eq!(got, expected, "{repository}@{version}/labels");
    }

    let want: Value =
        serde_json::from_slice(&std::fs::read(data_dir().join("expected_anndata.json")).unwrap())
            .unwrap();
    let got = query(&ctx, &format!("SELECT * FROM '{plain}'")).await;
    for column in ["_index", "barcode", "cell_type"] {
        let expected: Vec<Option<String>> = want["anndata_v3.zarr"]["obs"]["columns"][column]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().map(str::to_string))
            .collect();
        assert_eq!(strings(&got, column), expected, "{plain}: {column}");
    }
}

/// A new repository in `bucket` (a location such as `icechunk+az://container`): `COPY`
/// creates it in one commit, `INSERT INTO` a table registered at its branch appends in
/// another, both answering the snapshot they committed, and the first snapshot still reads
/// as the first table.
async fn copy_insert_and_read_back(bucket: &str) {
    let root = format!("{bucket}/{}.icechunk", unique_name("writes"));
    let t = format!("{root}@main/t");
    let ctx = zarrow_datafusion::zarr_session_context(Default::default());

    let copied = query(
        &ctx,
        &format!(
            "COPY (SELECT * FROM (VALUES (1, 'a'), (2, 'bb'), (3, NULL)) AS v(id, s)) TO '{t}' \
             STORED AS ZARR OPTIONS (chunk_rows 2, create_repository true)"
        ),
    )
    .await;
    let (count, first) = written(&copied);
    assert_eq!(count, "3");

    query(
        &ctx,
        &format!("CREATE EXTERNAL TABLE ice STORED AS ZARR LOCATION '{t}'"),
    )
    .await;
    let rows = query(&ctx, "SELECT id, s FROM ice ORDER BY id").await;
    assert_eq!(
        strings(&rows, "id"),
        texts(&[Some("1"), Some("2"), Some("3")])
    );
    // NULL strings are written as "" in this layout (docs/writing.md)
    assert_eq!(
        strings(&rows, "s"),
        texts(&[Some("a"), Some("bb"), Some("")])
    );

    let inserted = query(&ctx, "INSERT INTO ice (id, s) VALUES (4, 'dddd'), (5, 'e')").await;
    let (count, second) = written(&inserted);
    assert_eq!(count, "2");
    assert_ne!(first, second, "the INSERT is a commit of its own");

    let rows = query(&ctx, "SELECT id, s FROM ice ORDER BY id").await;
    assert_eq!(
        strings(&rows, "id"),
        texts(&[Some("1"), Some("2"), Some("3"), Some("4"), Some("5")])
    );
    assert_eq!(
        strings(&rows, "s"),
        texts(&[Some("a"), Some("bb"), Some(""), Some("dddd"), Some("e")])
    );

    // The snapshot the INSERT committed is the branch now; the COPY's keeps the first table.
    for (name, version, n) in [("at_second", &second, 5), ("at_first", &first, 3)] {
        query(
            &ctx,
            &format!("CREATE EXTERNAL TABLE {name} STORED AS ZARR LOCATION '{root}@{version}/t'"),
        )
        .await;
        let rows = query(&ctx, &format!("SELECT id FROM {name} ORDER BY id")).await;
        assert_eq!(rows.num_rows(), n, "{root}@{version}");
    }
    let old = query(&ctx, "SELECT id, s FROM at_first ORDER BY id").await;
    assert_eq!(
        strings(&old, "s"),
        texts(&[Some("a"), Some("bb"), Some("")])
    );
}

#[tokio::test]
async fn icechunk_and_plain_stores_on_azure() {
    if optional_loopback("ZARROW_TEST_AZURE").is_none() {
        return;
    }
    read_fixtures(
        "icechunk+az://zarrow-fixtures/atlas.icechunk",
        "az://zarrow-fixtures/anndata_v3.zarr/obs",
    )
    .await;
    copy_insert_and_read_back("icechunk+az://zarrow-test").await;
}

#[tokio::test]
async fn icechunk_and_plain_stores_on_gcs() {
    if optional_loopback("ZARROW_TEST_GCS").is_none() {
        return;
    }
    read_fixtures(
        "icechunk+gs://zarrow-fixtures/atlas.icechunk",
        "gs://zarrow-fixtures/anndata_v3.zarr/obs",
    )
    .await;
}

/// Azurite's development account key.
const AZURITE_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

fn pairs(options: &[(&str, &str)]) -> Vec<(String, String)> {
    options
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The store options reach a repository on Azure, as Python's `storage_options` and
/// `ZarrStore::open_configured` give them: the account, its key and its endpoint, with the
/// environment's emulator mode turned off by an option, write a table (one commit, reported)
/// that reads back through them; a wrong key among them is refused by the server (the
/// environment alone would have opened it).
#[tokio::test]
async fn store_options_open_a_repository_on_azure() {
    use std::sync::Arc;

    use arrow::array::Int64Array;
    use arrow::datatypes::{Field, Schema};
    use zarrow::{RemoteOptions, TableWriteOptions, TableWriter, ZarrStore};

    let Some(endpoint) = optional_loopback("ZARROW_TEST_AZURE") else {
        return;
    };
    let with_key = |key: &str| {
        pairs(&[
            ("azure_storage_use_emulator", "false"),
            ("azure_storage_account_name", "devstoreaccount1"),
            ("azure_storage_account_key", key),
            ("azure_storage_endpoint", &endpoint),
            ("allow_http", "true"),
        ])
    };
    let t = format!(
        "icechunk+az://zarrow-test/{}.icechunk@main/t",
        unique_name("options")
    );
    let options = with_key(AZURITE_KEY);
    let open = || ZarrStore::open_configured(&t, &options, &RemoteOptions::default()).unwrap();

    let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![Arc::new(Int64Array::from(vec![7, 8, 9]))],
    )
    .unwrap();
    let write = TableWriteOptions {
        create_repository: true,
        ..Default::default()
    };
    let mut writer = TableWriter::try_new(open(), schema, write).await.unwrap();
    writer.write(&batch).await.unwrap();
    let written = writer.finish_written().await.unwrap();
    assert!(written.snapshot.is_some(), "one commit, reported");
    let ids = read_column(open(), &t, "id").await.unwrap();
    assert_eq!(ids, texts(&[Some("7"), Some("8"), Some("9")]));

    let wrong = with_key(&AZURITE_KEY.replace('E', "F"));
    let store = ZarrStore::open_configured(&t, &wrong, &RemoteOptions::default()).unwrap();
    let e = read_column(store, &t, "id").await.unwrap_err().to_string();
    assert!(e.contains("403") || e.contains("uthenticat"), "{e}");
}

/// The same for GCS reads: the base URL among the options wins over the environment's, so
/// one that leads nowhere on the same server finds no repository where the environment alone
/// would have read it.
#[tokio::test]
async fn store_options_open_a_repository_on_gcs() {
    use zarrow::{RemoteOptions, ZarrStore};

    let Some(base) = optional_loopback("ZARROW_TEST_GCS") else {
        return;
    };
    let t = "icechunk+gs://zarrow-fixtures/atlas.icechunk@v1/labels";
    let open = |url: &str| {
        let options = pairs(&[
            ("google_base_url", url),
            ("google_skip_signature", "true"),
            ("allow_http", "true"),
        ]);
        ZarrStore::open_configured(t, &options, &RemoteOptions::default()).unwrap()
    };
    let labels = read_column(open(&base), t, "labels").await.unwrap();
    assert_eq!(labels.len(), 10);
    let e = read_column(open(&format!("{base}/nowhere")), t, "labels")
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("no Icechunk repository"), "{e}");
}

/// The column `column` of the table at the root of `store`, as text.
async fn read_column(
    store: zarrow::ZarrStore,
    display: &str,
    column: &str,
) -> zarrow::Result<Vec<Option<String>>> {
    use std::sync::Arc;

    use futures::TryStreamExt;
    use zarrow::{Node, TableModel, TableOptions, ZarrScan};

    let node = Node::open_store(store, display).await?;
    let model = Arc::new(TableModel::from_node(node, TableOptions::default()).await?);
    let batches: Vec<RecordBatch> = ZarrScan::new(&model)
        .stream(model.clone(), Default::default())?
        .try_collect()
        .await?;
    Ok(batches.iter().flat_map(|b| strings(b, column)).collect())
}
