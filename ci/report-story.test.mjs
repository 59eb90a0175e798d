// The story renders the run's verdict file and decides nothing (node --test; ci/report-check runs it): the headline is
// the verdict file's whatever the Allure statuses say, every outcome shows as itself, a run that wrote no verdict says
// so, the counts are the verdict file's; the trend compares like with like and never calls an in-budget change worse;
// long lists fold after the first few, in order.
import assert from "node:assert/strict";
import { appendFileSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { FOLD, keep, panel, prepare, trendOf } from "./report-story.mjs";

const layer = (conforms, worst) => ({ conforms, worst_ratio_to_budget: worst });
const run = (reference, layers, engine = "k3j forward", model = "m") => ({ timestamp: Date.UTC(2026, 0, 1), engine, model, reference, layers });

/** A results folder of one run: its verdict file (as RunPlan writes it) and Allure results of the given statuses. */
function folder(verdict, statuses, { id = "r1", started = true } = {}) {
  const dir = mkdtempSync(join(tmpdir(), "k3-story-"));
  if (started) writeFileSync(join(dir, "k3-run-started.json"), JSON.stringify({ format: "k3-run-started", run: id, started: "2026-01-01T00:00:00Z" }));
  if (verdict) {
    writeFileSync(join(dir, `k3-run-${id}-plan.json`), JSON.stringify({ format: "k3-plan", run: id, items: [] }));
    writeFileSync(join(dir, `k3-run-${id}-verdict.json`), JSON.stringify({ run: id, ...verdict }));
  }
  statuses.forEach((status, i) => writeFileSync(join(dir, `c${i}-result.json`), JSON.stringify({
    uuid: `u${i}`, name: i === 0 ? "overview: layers 0-92 x stages" : `L${i} MLA`, status, start: i,
    labels: [{ name: "part", value: "2 · layers" }, { name: "run", value: id }],
  })));
  return dir;
}

function story(dir) {
  const out = join(dir, "story.json");
  prepare(dir, out, null);
  const s = JSON.parse(readFileSync(out, "utf8"));
  return { s, html: panel(s) };
}

const headline = (html) => /data-k3-verdict>([^<]*)</.exec(html)[1];
const counts = (failed, total) => ({ layers: { total, passed: total - failed, failed, skipped: 0, skips: [] } });

test("a verdict file saying DOES NOT CONFORM over all-passed results renders DOES NOT CONFORM", () => {
  const dir = folder({ outcome: "DOES_NOT_CONFORM", words: "DOES NOT CONFORM", headline: "DOES NOT CONFORM", green: false, findings: ["L3 does not conform"],
    first_divergence: { uuid: "u3", where: "L3 MLA", stage: "attn_out", category: "[wrong constant or formula]", ratio_to_budget: "41.0", detail: "stage attn_out · [wrong constant or formula] · 41.0x budget" },
    counts: counts(1, 93) }, ["passed", "passed", "passed", "passed"]);
  const { html } = story(dir);
  assert.equal(headline(html), "DOES NOT CONFORM");
  assert.match(html, /L3 MLA<\/a> · stage attn_out · \[wrong constant or formula\] · 41.0x budget/);
  assert.doesNotMatch(html, /within budget/);
});

test("a verdict file saying CONFORMS over failed results renders CONFORMS, its own counts and first divergence line", () => {
  const dir = folder({ outcome: "CONFORMS", words: "CONFORMS", headline: "CONFORMS", green: true, findings: [],
    first_divergence: null, first_divergence_text: "none: all 97 planned items were judged and conform", counts: counts(0, 93) }, ["failed", "failed", "broken"]);
  const { html } = story(dir);
  assert.equal(headline(html), "CONFORMS");
  assert.match(html, /none: all 97 planned items were judged and conform/);
  // the layers count is the verdict file's 93 layers, not the results' cases (the overview among them)
  assert.match(html, /data-k3-count="layers" data-k3-failed="0" data-k3-total="93"><b>layers<\/b> 93\/93 pass/);
});

test("every outcome renders as itself: REFUSED, WITHIN and OUTSIDE are not INCOMPLETE", () => {
  for (const [outcome, words, green] of [["REFUSED", "REFUSED", false], ["WITHIN", "WITHIN THE THRESHOLDS", true], ["OUTSIDE", "OUTSIDE THE THRESHOLDS", false],
    ["INCOMPLETE", "INCOMPLETE", false], ["NO_CHECKPOINT", "NO CHECKPOINT CHECKED", false]]) {
    const { html } = story(folder({ outcome, words, green, findings: green ? [] : ["why"] }, ["passed"]));
    assert.equal(headline(html), words, outcome);
    assert.match(html, green ? /k3-verdict k3-ok/ : /k3-verdict k3-bad/, outcome);
  }
});

test("a run that wrote no verdict (killed while compiling) says so, and joins no history", () => {
  const { s, html } = story(folder(null, [], { id: "killed" }));
  assert.equal(headline(html), "NO VERDICT");
  assert.match(html, /run killed, started 2026-01-01T00:00:00Z, wrote no verdict/);
  assert.equal(s.history, false);
});

test("the bisect line is the verdict file's: a candidate's says bisect does not apply", () => {
  const { html } = story(folder({ outcome: "DOES_NOT_CONFORM", words: "DOES NOT CONFORM", green: false, findings: ["x"], candidate_run: true,
    bisect: "does not apply to a candidate dump: ... k3 corrupt ..." }, []));
  assert.match(html, /data-k3-bisect>does not apply to a candidate dump: \.\.\. k3 corrupt \.\.\.</);
});

test("the trend never calls an in-budget change worse; a layer that conformed and no longer does is", () => {
  const before = run("ref", { L3: layer(true, "0.01"), L5: layer(true, "0.2"), L87: layer(false, "50.0") });
  const t = trendOf(run("ref", { L3: layer(true, "0.9"), L5: layer(false, "8.33e+05"), L87: layer(true, "0.5") }), [before]);
  assert.deepEqual(t.worse.map((g) => g.name), ["L5"]);   // L3 grew 90x, still conforms: not worse
  assert.deepEqual(t.better.map((g) => g.name), ["L87"]);
  assert.equal(trendOf(run("ref", { L3: layer(true, "0.9") }), [run("ref", { L3: layer(true, "0.001") })]).worse.length, 0);
});

test("another engine, another reference or another layer set is not compared; the last like run is", () => {
  const now = run("ref", { L3: layer(false, "2"), L5: layer(true, "0.5") });
  assert.match(trendOf(now, [run("ref", { L3: layer(true, "1"), L5: layer(true, "1") }, "k3ref mutant")]).nothing, /was of k3ref mutant/);
  assert.match(trendOf(now, [run("other", { L3: layer(true, "1"), L5: layer(true, "1") })]).nothing, /against other/);
  assert.match(trendOf(now, [run("ref", { L3: layer(true, "1") })]).nothing, /judged 1 layers/);
  assert.match(trendOf(now, [run("ref", {})]).nothing, /judged no layer/);
  const t = trendOf(now, [run("ref", { L3: layer(true, "1"), L5: layer(true, "1") }, "k3j forward", "clean"), run("ref", { L3: layer(true, "1") })]);
  assert.equal(t.previousModel, "clean");
  assert.deepEqual(t.worse.map((g) => g.name), ["L3"]);
});

test("the worse layers come in the verdict file's order and a long list folds after the first few", () => {
  const names = Array.from({ length: 24 }, (_, i) => `L${i * 3}`);
  const t = trendOf(run("ref", Object.fromEntries(names.map((n) => [n, layer(false, "100")]))), [run("ref", Object.fromEntries(names.map((n) => [n, layer(true, "0.5")])))]);
  assert.deepEqual(t.worse.map((g) => g.name), names);
  const h = panel({ verdict: "DOES NOT CONFORM", green: false, findings: [], notJudged: [], first: null, firstText: "-", bisect: "-", failingLayers: [], catches: [], caught: 0,
    counts: {}, trend: { ...t, worse: t.worse.map((g) => ({ ...g, label: g.name })) } });
  assert.match(h, new RegExp(`and ${24 - FOLD} more`));
  assert.ok(h.indexOf(`>${names[FOLD - 1]}<`) < h.indexOf("<details"), "the first few before the fold");
});

test("Allure is given the history of the same engine and reference alone, and the run it adds is kept tagged with them", () => {
  const dir = folder({ outcome: "CONFORMS", words: "CONFORMS", headline: "CONFORMS", green: true, findings: [], engine: "torch port", model: "cand",
    reference_manifest_sha256: "aaa", layers: { L3: { conforms: true, worst_ratio_to_budget: "0.5", uuid: "u1" } }, joins_history: true }, ["passed"]);
  const hist = join(dir, "history.jsonl"), like = join(dir, "like.jsonl"), out = join(dir, "story.json");
  const line = (k3, ts) => JSON.stringify({ uuid: `h${ts}`, timestamp: ts, testResults: { x: { name: "L3 MLA", status: ts === 1 ? "passed" : "failed" } }, ...(k3 && { k3 }) });
  // the same engine and reference; another engine (its L3 failed: "got worse" and a flaky mark if compared); another
  // reference; a line with no tag (like no run)
  writeFileSync(hist, [line({ engine: "torch port", reference: "aaa" }, 1), line({ engine: "k3j forward", reference: "aaa" }, 2),
    line({ engine: "torch port", reference: "bbb" }, 3), line(null, 4)].join("\n") + "\n");
  prepare(dir, out, hist, like);
  const given = readFileSync(like, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l).timestamp);
  assert.deepEqual(given, [1], "Allure's history holds the like run alone");
  const s = JSON.parse(readFileSync(out, "utf8"));
  assert.equal(s.trend.allureHistory.others, 3);
  assert.match(panel(s), /data-k3-history-others>\(3 earlier runs of another engine or reference left out/);
  // Allure appends this run to the history it was given; the kept history gets that line, tagged
  appendFileSync(like, JSON.stringify({ uuid: "now", timestamp: 5, testResults: {} }) + "\n");
  keep(out, like, hist);
  const kept = readFileSync(hist, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l));
  assert.equal(kept.length, 5);
  assert.deepEqual(kept[4].k3, { engine: "torch port", reference: "aaa" });
  assert.equal(kept[4].uuid, "now");
});
