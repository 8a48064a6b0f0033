"""The threshold at which a judge's yes/no best matches people's (`best_threshold`).

Split from `agreement` (which reports it) to keep that module readable; the reasoning for the
choice — Cohen's kappa over the observed score values, ties to the cut nearest the default — is
in `agreement`'s docstring.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["DEFAULT_THRESHOLD", "best_threshold"]

DEFAULT_THRESHOLD = 0.5
"""The judge's verdict threshold when the metric states none (see `agreement`'s docstring)."""

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


def _kappa_2x2(tp: FloatArray, fp: FloatArray, fn: FloatArray, tn: FloatArray) -> FloatArray:
    """Cohen's kappa of 2×2 tables, vectorised for the threshold search only.

    ``kappa = 2 (TP·TN − FP·FN) / ((TP+FP)(FP+TN) + (TP+FN)(FN+TN))``, the 2×2 form of
    ``(p_o − p_e) / (1 − p_e)``. The reported kappa is recomputed with `stats.cohen_kappa`.
    """
    denominator = (tp + fp) * (fp + tn) + (tp + fn) * (fn + tn)
    out: FloatArray = 2.0 * (tp * tn - fp * fn) / np.where(denominator > 0, denominator, 1.0)
    return out


def best_threshold(
    scores: FloatArray, people: BoolArray, *, inverted: bool, default: float = DEFAULT_THRESHOLD
) -> float | str:
    """The observed score value whose cut maximises Cohen's kappa, or why there is none.

    Candidates are the distinct scores: cutting at ``u`` gives the verdict ``score > u`` (``<``
    for a measure of harm), so every distinct split of these samples is tried once. Cuts where
    the judge says the same for every sample are left out. Ties go to the cut closest to
    ``default``, then to the lower one.
    """
    if people.all() or not people.any():
        return "people gave one answer on every sample: no threshold can be chosen"
    values, where = np.unique(scores, return_inverse=True)
    if values.size < 2:
        return f"the judge gave every sample the same score ({values[0]:g})"
    weights = people.astype(np.float64)
    pos_at = np.asarray(np.bincount(where, weights, values.size), dtype=np.float64)
    neg_at = np.asarray(np.bincount(where, 1.0 - weights, values.size), dtype=np.float64)
    n_pos, n_neg = float(pos_at.sum()), float(neg_at.sum())
    tp: FloatArray
    fp: FloatArray
    if inverted:  # yes when score < u: the values strictly below u
        tp = np.cumsum(pos_at) - pos_at
        fp = np.cumsum(neg_at) - neg_at
    else:  # yes when score > u: the values strictly above u
        tp = n_pos - np.cumsum(pos_at)
        fp = n_neg - np.cumsum(neg_at)
    fn: FloatArray = n_pos - tp
    tn: FloatArray = n_neg - fp
    said_yes = tp + fp
    usable = (said_yes > 0) & (said_yes < n_pos + n_neg)
    kappas = np.where(usable, _kappa_2x2(tp, fp, fn, tn), -np.inf)
    top = float(kappas.max())
    candidates = np.flatnonzero(usable & (kappas >= top - 1e-12))
    order = sorted(candidates, key=lambda i: (abs(float(values[i]) - default), float(values[i])))
    return float(values[order[0]])
