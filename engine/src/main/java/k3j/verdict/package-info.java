/**
 * The one decision (docs/semantics.md §10.11): {@link k3j.verdict.Invariants#decide} turns the items an entry point
 * judged into the one {@link k3j.verdict.Verdict} every exit code, printed VERDICT line and verdict file renders;
 * {@link k3j.verdict.PlanVerdict} is a run's verdict over what it planned; {@link k3j.verdict.Finding} is the closed
 * set of categories and {@link k3j.verdict.ConformException} a run that cannot be judged, tagged with its finding.
 * Only this package constructs a verdict. It depends on no dump or comparison: they depend on it.
 */
package k3j.verdict;
