// The story's rules on made-up runs (node --test; ci/report-check runs it): the trend compares like with like and
// says when there is nothing to compare; long lists fold after the first few, in order.
import assert from "node:assert/strict";
import { test } from "node:test";
import { FOLD, panel, trendOf, TREND_FACTOR } from "./report-story.mjs";

const run = (reference, worst, model = "m") => ({ timestamp: Date.UTC(2026, 0, 1), model, reference, layers: Object.keys(worst).map((n) => Number(n.slice(1))), worst });
const now = run("ref", { L3: 2, L5: 8.33e5, L87: 0.5 });

test("a previous run without layers is nothing to compare, never 'no layer grew'", () => {
  const t = trendOf(now, [run("ref", {})]);
  assert.equal(t.previous, null);
  assert.match(t.nothing, /compared no layer/);
  assert.match(html(t), /nothing to compare/);
  assert.doesNotMatch(html(t), /grew/);
});

test("another reference or another layer set is not compared; the last like run is", () => {
  assert.match(trendOf(now, [run("other", { L3: 1, L5: 1, L87: 1 })]).nothing, /against other/);
  assert.match(trendOf(now, [run("ref", { L3: 1, L5: 1 })]).nothing, /compared 2 layers/);
  const t = trendOf(now, [run("ref", { L3: 1, L5: 1, L87: 1 }, "clean"), run("ref", { L3: 1, L5: 1 })]);
  assert.equal(t.previousModel, "clean");
  assert.deepEqual(t.grew.map((g) => g.name), ["L5"]);   // L3 grew 2x: not more than the factor
  assert.ok(TREND_FACTOR === 2 && t.grew[0].growth === 8.33e5);
});

test("the grown layers come in numeric order and a long list folds after the first few", () => {
  const many = Object.fromEntries(Array.from({ length: 24 }, (_, i) => [`L${[87, 3, 10][i % 3] + i}`, 100]));
  const before = Object.fromEntries(Object.keys(many).map((k) => [k, 1]));
  const t = trendOf(run("ref", many), [run("ref", before)]);
  const nums = t.grew.map((g) => Number(g.name.slice(1)));
  assert.deepEqual(nums, [...nums].sort((a, b) => a - b));
  const h = html(t);
  assert.match(h, new RegExp(`and ${24 - FOLD} more`));
  assert.ok(h.indexOf(`>${t.grew[FOLD - 1].name}<`) < h.indexOf("<details"), "the first few before the fold");
});

function html(trend) {
  const c = { total: 0, passed: 0, failed: 0, skipped: 0, skips: [] };
  return panel({ verdict: "DOES NOT CONFORM", model: "m", reference: "ref", first: null, failingLayers: [], catches: [], trend,
    counts: { model: c, layers: c, experts: c, logits: c, greedy: c, gates: c, harness: c } });
}
