//! Writing query results: where they go (stdout or a file) and in which text format.

use std::fs::File;
use std::io::{BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use arrow::util::display::{ArrayFormatter, FormatOptions};
use clap::ValueEnum;

/// `zarrow sql --format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum SqlFormat {
    /// An aligned text table.
    Table,
    /// CSV with a header row.
    Csv,
    /// One JSON array of row objects.
    Json,
    /// One JSON object per line.
    Ndjson,
}

/// A destination: standard output, or a file that is removed again if writing fails.
pub(crate) struct Sink {
    writer: Box<dyn Write + Send>,
    path: Option<PathBuf>,
    done: bool,
}

impl Sink {
    /// `None` or `-` → standard output, else a new file.
    pub(crate) fn open(path: Option<&Path>) -> Result<Sink> {
        match path {
            None => Ok(Sink::stdout()),
            Some(p) if p.as_os_str() == "-" => Ok(Sink::stdout()),
            Some(p) => {
                let file =
                    File::create(p).with_context(|| format!("cannot create '{}'", p.display()))?;
                Ok(Sink {
                    writer: Box::new(BufWriter::with_capacity(1 << 20, file)),
                    path: Some(p.to_path_buf()),
                    done: false,
                })
            }
        }
    }

    fn stdout() -> Sink {
        Sink {
            writer: Box::new(BufWriter::new(std::io::stdout())),
            path: None,
            done: false,
        }
    }

    /// Flush; from now on the file stays even if the sink is dropped.
    pub(crate) fn finish(mut self) -> Result<()> {
        self.writer.flush().context("cannot write the output")?;
        self.done = true;
        Ok(())
    }
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.writer.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.writer.flush()
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        if !self.done {
            if let Some(p) = &self.path {
                let _ = std::fs::remove_file(p);
            }
        }
    }
}

/// Writes one statement's result in a text format, batch by batch (the table format keeps the
/// batches, to size its columns).
pub(crate) enum ResultWriter<'a, W: Write> {
    /// Batches kept for the pretty printer.
    Table(&'a mut W, SchemaRef, Vec<RecordBatch>),
    /// CSV with a header.
    Csv(Box<arrow::csv::Writer<&'a mut W>>, SchemaRef, bool),
    /// A JSON array.
    Json(arrow::json::Writer<&'a mut W, arrow::json::writer::JsonArray>),
    /// JSON lines.
    Ndjson(arrow::json::Writer<&'a mut W, arrow::json::writer::LineDelimited>),
}

impl<'a, W: Write> ResultWriter<'a, W> {
    /// Start a result of `schema` in `format`.
    pub(crate) fn new(format: SqlFormat, schema: SchemaRef, out: &'a mut W) -> Self {
        match format {
            SqlFormat::Table => ResultWriter::Table(out, schema, Vec::new()),
            SqlFormat::Csv => ResultWriter::Csv(
                Box::new(
                    arrow::csv::WriterBuilder::new()
                        .with_header(true)
                        .build(out),
                ),
                schema,
                false,
            ),
            SqlFormat::Json => ResultWriter::Json(
                arrow::json::WriterBuilder::new()
                    .with_explicit_nulls(true)
                    .build::<_, arrow::json::writer::JsonArray>(out),
            ),
            SqlFormat::Ndjson => ResultWriter::Ndjson(
                arrow::json::WriterBuilder::new()
                    .with_explicit_nulls(true)
                    .build::<_, arrow::json::writer::LineDelimited>(out),
            ),
        }
    }

    /// Write (or keep) one batch.
    pub(crate) fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        match self {
            ResultWriter::Table(_, _, batches) => batches.push(batch.clone()),
            ResultWriter::Csv(w, _, wrote) => {
                w.write(batch).context("cannot write CSV")?;
                *wrote = true;
            }
            // arrow's JSON writer, like its table printer, writes unformattable values as text.
            ResultWriter::Json(w) => {
                check_displayable(std::slice::from_ref(batch))?;
                w.write(batch).context("cannot write JSON")?
            }
            ResultWriter::Ndjson(w) => {
                check_displayable(std::slice::from_ref(batch))?;
                w.write(batch).context("cannot write NDJSON")?
            }
        }
        Ok(())
    }

    /// End the result (the table is printed now; an empty CSV result still gets its header, an
    /// empty JSON result is `[]`).
    pub(crate) fn finish(self) -> Result<()> {
        match self {
            ResultWriter::Table(out, schema, batches) => {
                check_displayable(&batches)?;
                let table = if batches.iter().all(|b| b.num_rows() == 0) {
                    arrow::util::pretty::pretty_format_batches(&[RecordBatch::new_empty(schema)])
                } else {
                    arrow::util::pretty::pretty_format_batches(&batches)
                }
                .context("cannot format the result")?;
                writeln!(out, "{table}")?;
            }
            ResultWriter::Csv(mut w, schema, wrote) => {
                if !wrote {
                    w.write(&RecordBatch::new_empty(schema))
                        .context("cannot write CSV")?;
                }
            }
            ResultWriter::Json(mut w) => {
                w.finish().context("cannot write JSON")?;
                writeln!(w.get_mut())?;
            }
            ResultWriter::Ndjson(mut w) => w.finish().context("cannot write NDJSON")?,
        }
        Ok(())
    }
}

/// Every cell of `batches` formats: arrow's table printer writes a value it cannot format
/// (a timestamp out of range, …) into the cell as `ERROR: …` text and succeeds; here that is
/// an error naming the column and row (counted from the first of `batches`), and the command
/// fails.
fn check_displayable(batches: &[RecordBatch]) -> Result<()> {
    let options = FormatOptions::default();
    let mut first_row = 0;
    for batch in batches {
        for (column, field) in batch.columns().iter().zip(batch.schema().fields()) {
            // Numbers, strings, bytes and booleans always format: only dates and times (and
            // what may hold them) are looked at, so ordinary results are not formatted twice.
            let dt = field.data_type();
            if !(dt.is_temporal()
                || dt.is_nested()
                || matches!(dt, arrow::datatypes::DataType::Dictionary(..)))
            {
                continue;
            }
            let formatter = ArrayFormatter::try_new(column.as_ref(), &options)
                .with_context(|| format!("cannot format column '{}'", field.name()))?;
            for row in 0..batch.num_rows() {
                formatter.value(row).try_to_string().with_context(|| {
                    format!(
                        "cannot format column '{}' at row {}",
                        field.name(),
                        first_row + row
                    )
                })?;
            }
        }
        first_row += batch.num_rows();
    }
    Ok(())
}

/// Progress on stderr (`N rows`), only when stderr is a terminal, at most 5 times a second.
pub(crate) struct Progress {
    enabled: bool,
    rows: u64,
    last: Instant,
    label: &'static str,
}

impl Progress {
    /// Progress for `label` ("exported", …).
    pub(crate) fn new(label: &'static str) -> Self {
        Progress {
            enabled: std::io::stderr().is_terminal(),
            rows: 0,
            last: Instant::now(),
            label,
        }
    }

    /// Count rows; redraw if due.
    pub(crate) fn add(&mut self, rows: usize) {
        self.rows += rows as u64;
        if self.enabled && self.last.elapsed() >= Duration::from_millis(200) {
            self.last = Instant::now();
            eprint!("\r{} {} rows", self.label, self.rows);
        }
    }

    /// The final count and where the rows went, with a newline.
    pub(crate) fn finish(&self, to: &str) {
        if self.enabled {
            eprintln!("\r{} {} rows to {to}", self.label, self.rows);
        }
    }
}
