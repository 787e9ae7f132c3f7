"""Write data/pbmc_sample.zarr: a small, synthetic, AnnData-like single-cell store (zarr v3).

Run from the repository root with the zarr-python 3 venv (created by
tests/fixtures/setup_venvs.sh; anndata is installed there):

    .venv-zarr3/bin/python data/make_sample.py

The data are made up (fixed seed, so two runs write the same values) but shaped like a PBMC
experiment: 2,000 cells x 200 genes, cell-type labels with a few cells left unannotated, two
donors, a nullable gene count, mitochondrial fraction and a 2-D embedding. After writing, the
store is read back with anndata and with plain zarr-python and checked.
"""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import numpy as np

warnings.simplefilter("ignore")

import anndata as ad  # noqa: E402
import pandas as pd  # noqa: E402
import zarr  # noqa: E402

OUT = Path(__file__).resolve().parent / "pbmc_sample.zarr"

N_CELLS = 2000
N_GENES = 200
SEED = 20240611

# Cell types with their share of cells and a few marker genes each (marker genes get higher
# counts in that cell type, so SQL over X gives sensible answers).
CELL_TYPES = {
    "CD4 T": (0.30, ["IL7R", "CD3E", "CD3D", "LDHB"]),
    "CD14 Monocyte": (0.20, ["CD14", "LYZ", "S100A8", "S100A9"]),
    "B": (0.14, ["MS4A1", "CD79A", "CD79B", "CD19"]),
    "CD8 T": (0.12, ["CD8A", "CD8B", "CD3E", "GZMK"]),
    "NK": (0.09, ["GNLY", "NKG7", "GZMB", "PRF1"]),
    "FCGR3A Monocyte": (0.08, ["FCGR3A", "MS4A7", "LST1", "AIF1"]),
    "Dendritic": (0.05, ["FCER1A", "CST3", "CLEC10A", "HLA-DQA1"]),
    "Megakaryocyte": (0.02, ["PPBP", "PF4", "GP9", "ITGA2B"]),
}

OTHER_GENES = """
ACTB ACTG1 B2M GAPDH TMSB4X TMSB10 MALAT1 EEF1A1 FTL FTH1 TPT1 MYL6 PFN1 CFL1 HLA-A HLA-B HLA-C
HLA-DRA HLA-DRB1 HLA-DPA1 HLA-DPB1 CD74 CD52 CD37 CD48 CD2 CD7 CD247 CD69 CD44 PTPRC SELL CCR7
LEF1 TCF7 MAL NOSIP CTLA4 FOXP3 IL2RA TIGIT GZMA GZMH CCL5 CST7 KLRB1 KLRD1 KLRF1 FCGR3B CTSW
XCL2 FCN1 VCAN CSF1R CD68 TYROBP FCER1G LGALS2 LGALS3 SERPINA1 IFITM3 IFITM2 COTL1 SPI1 CEBPB
CD86 ITGAX IRF8 LILRA4 IL3RA TCL1A CD22 BANK1 IGHM IGHD IGKC IGLC2 JCHAIN MZB1 VPREB3 FCRLA
SPARC GNG11 CLU TUBB1 NRGN HBB HBA1 HBA2 MKI67 TOP2A STMN1 TUBA1B HMGB2 JUN JUNB FOS FOSB IER2
DUSP1 KLF6 NFKBIA TNFAIP3 ZFP36 CXCR4 ISG15 IFI6 MX1 OAS1 STAT1 IRF7 LTB IL32 ANXA1 S100A4
S100A6 S100A10 S100A11 VIM ARL4C EMP3 SH3BGRL3 CORO1A ARHGDIB LCP1 LSP1 RAC2 ALOX5AP
PSAP CTSS NPC2 GRN TIMP1 LGALS1 CAPG OAZ1 UBB UBC PPIA PPIB NACA BTF3 EIF1 EIF3K SRGN PTMA
HNRNPA1 SERF2 COX4I1 ATP5F1E NDUFA4 SNRPD2 SOD1 TXN PRDX1 GSTP1
""".split()

MITO_GENES = ["MT-ND1", "MT-ND2", "MT-CO1", "MT-CO2", "MT-ATP6", "MT-CO3", "MT-ND4", "MT-CYB"]
RIBO_GENES = [f"RPL{i}" for i in (3, 7, 10, 13, 21, 32)] + [f"RPS{i}" for i in (3, 6, 12, 18, 27, 29)]


def gene_list() -> list[str]:
    genes: list[str] = []
    for _, markers in CELL_TYPES.values():
        genes += [g for g in markers if g not in genes]
    others = [g for g in OTHER_GENES if g not in genes]
    genes += others[: N_GENES - len(genes) - len(MITO_GENES) - len(RIBO_GENES)]
    genes += MITO_GENES + RIBO_GENES
    assert len(genes) == len(set(genes)) == N_GENES, "duplicate or missing gene symbols"
    return genes


def build() -> ad.AnnData:
    rng = np.random.default_rng(SEED)
    genes = gene_list()
    n_genes_total = len(genes)
    gene_pos = {g: i for i, g in enumerate(genes)}

    names = list(CELL_TYPES)
    share = np.array([CELL_TYPES[t][0] for t in names])
    labels = rng.choice(len(names), size=N_CELLS, p=share / share.sum())

    # Baseline expression per gene, boosted for each cell type's markers; mitochondrial and
    # ribosomal genes are high everywhere.
    base = rng.gamma(0.4, 0.6, size=n_genes_total)
    for g in MITO_GENES:
        base[gene_pos[g]] += 0.4
    for g in RIBO_GENES:
        base[gene_pos[g]] += 2.0
    rates = np.tile(base, (len(names), 1))
    for t, (_, markers) in enumerate(CELL_TYPES.values()):
        for g in markers:
            rates[t, gene_pos[g]] += rng.uniform(4.0, 9.0)
    depth = rng.lognormal(0.0, 0.35, size=N_CELLS)[:, None]
    counts = rng.poisson(rates[labels] * depth).astype(np.float32)

    mito = [gene_pos[g] for g in MITO_GENES]
    totals = counts.sum(axis=1, dtype=np.float64)
    pct_mito = np.round(100.0 * counts[:, mito].sum(axis=1, dtype=np.float64) / np.maximum(totals, 1.0), 3)
    detected = (counts > 0).sum(axis=1).astype(np.int64)

    # A few cells are unannotated (missing cell type), and QC did not run on a few (no n_genes).
    cell_type = pd.Categorical([names[i] for i in labels], categories=names)
    cell_type[rng.choice(N_CELLS, size=23, replace=False)] = np.nan
    n_genes = pd.array(detected, dtype="Int64")
    n_genes[rng.choice(N_CELLS, size=17, replace=False)] = pd.NA

    barcodes = ["".join(rng.choice(list("ACGT"), size=16)) + "-1" for _ in range(N_CELLS)]
    batch = np.where(np.arange(N_CELLS) < N_CELLS // 2, "donor_A", "donor_B").astype(object)
    barcodes = [b[:-2] + ("-1" if d == "donor_A" else "-2") for b, d in zip(barcodes, batch)]

    obs = pd.DataFrame(
        {
            "cell_type": cell_type,
            "batch": batch,
            "n_genes": n_genes,
            "total_counts": totals.astype(np.float32),
            "pct_mito": pct_mito.astype(np.float64),
        },
        index=pd.Index(barcodes, name="barcode"),
    )
    assert obs.index.is_unique

    var = pd.DataFrame(
        {
            "gene_ids": np.array([f"ENSG{100000 + 37 * i:011d}" for i in range(n_genes_total)], dtype=object),
            "mito": np.array([g.startswith("MT-") for g in genes]),
            "n_cells": (counts > 0).sum(axis=0).astype(np.int64),
        },
        index=pd.Index(genes, name="gene_symbol"),
    )

    umap = np.stack([labels * 3.0, (labels % 3) * 2.5], axis=1) + rng.normal(0, 0.6, size=(N_CELLS, 2))
    adata = ad.AnnData(
        X=counts,
        obs=obs,
        var=var,
        obsm={"X_umap": umap.astype(np.float32)},
        uns={"description": "synthetic PBMC-like sample for zarrow (not real data)", "seed": SEED},
    )
    return adata


def check(adata: ad.AnnData) -> None:
    back = ad.read_zarr(str(OUT))
    assert back.shape == adata.shape
    pd.testing.assert_frame_equal(back.obs, adata.obs, check_dtype=False)
    pd.testing.assert_frame_equal(back.var, adata.var, check_dtype=False)
    np.testing.assert_array_equal(np.asarray(back.X), adata.X)

    root = zarr.open_group(str(OUT), mode="r")
    assert root.metadata.zarr_format == 3
    assert root["X"].dtype == np.float32 and root["X"].shape == adata.shape
    codes = root["obs/cell_type/codes"][...]
    assert (codes == -1).sum() == adata.obs["cell_type"].isna().sum()
    assert list(root["obs/batch"][...][:1]) == ["donor_A"]
    assert list(root["var/gene_symbol"][...][:2]) == list(adata.var_names[:2])

    size = sum(p.stat().st_size for p in OUT.rglob("*") if p.is_file())
    files = sum(1 for p in OUT.rglob("*") if p.is_file())
    assert size < 2 * 1024 * 1024, f"sample is {size} bytes"
    print(f"wrote {OUT.name}: {adata.n_obs} cells x {adata.n_vars} genes, {files} files, {size / 1024:.0f} KiB")
    print(adata.obs["cell_type"].value_counts(dropna=False).to_string())


def main() -> None:
    adata = build()
    if OUT.exists():
        shutil.rmtree(OUT)
    ad.settings.zarr_write_format = 3
    try:
        # keep `batch` a plain string column (anndata would turn it into a categorical), and chunk
        # X by 250 cells so it has several chunks
        adata.write_zarr(str(OUT), chunks=(250, adata.n_vars), convert_strings_to_categoricals=False)
    finally:
        ad.settings.reset(["zarr_write_format"])
    check(adata)


if __name__ == "__main__":
    main()
