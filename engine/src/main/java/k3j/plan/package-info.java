/**
 * Memory before anything large is allocated (docs/semantics.md §7.2-7.4): {@link k3j.plan.Preset} (the
 * {@code --list-presets} table and k3-doctor's recommendation), {@link k3j.plan.AutoBudget} ({@code auto}),
 * {@link k3j.plan.MemoryPlan} (the plan block; KV over 90% of MemAvailable refused with exit 2, the plan over
 * 95% with exit 1) and {@link k3j.plan.MemInfo} (MemTotal, MemAvailable, and the measured peak RSS, VmHWM,
 * which the run quotes instead of the plan: pitfall 28).
 */
package k3j.plan;
