// The report's first screen, from the results themselves: the verdict (CONFORMS / DOES NOT CONFORM), where the
// model first departs from the reference (layer, stage, category, ratio), bisect's diagnosis of it, the counts of
// each part, the trend against the previous run and what the harness catches. ci/report runs it twice:
//   node report-story.mjs prepare RESULTS STORY.json [HISTORY.jsonl]
//       reads the merged results folder (and the previous run from Allure's history), writes STORY.json and links
//       each failing logits case to the first divergence
//   node report-story.mjs inject STORY.json INDEX.html...
//       puts the story above Allure's own page in each report file (the folder's and the single file)
import { createHash } from "node:crypto";
import { appendFileSync, existsSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";

// the parts of the report (the harness's ReportPart titles), in causal order
const PART = { model: "1 · model", layers: "2 · layers", experts: "3 · experts, layer by layer", logits: "4 · logits and greedy ids", gates: "5 · engine gates", harness: "6 · harness self-tests" };
const STORY_PARTS = [PART.model, PART.layers, PART.experts, PART.logits];
const WORST_LABEL = "worst ratio to budget";
// a layer whose worst ratio to budget grew by more than this factor since the previous run is marked, in budget or not
export const TREND_FACTOR = 2;

const md5 = (s) => createHash("md5").update(s).digest("hex");
const label = (r, name) => r.labels?.find((l) => l.name === name)?.value;
const failed = (r) => r.status === "failed" || r.status === "broken";
const layerOf = (name) => Number(/^L\s*(\d+)/u.exec(name.replaceAll("\u2007", " "))?.[1] ?? NaN);
// Java's %.3g, as the harness prints ratios: 0.00212, 3.97e+04
const fmt = (x) => {
  if (x === null || x === undefined || !Number.isFinite(x)) return String(x);
  const a = Math.abs(x);
  if (a !== 0 && (a < 1e-4 || a >= 1e3)) {
    const [m, e] = x.toExponential(2).split("e");
    return `${m}e${e[0] === "-" ? "-" : "+"}${e.replace(/^[+-]/, "").padStart(2, "0")}`;
  }
  return x.toPrecision(3);
};

function readResults(dir) {
  const out = [];
  for (const f of readdirSync(dir)) {
    if (!f.endsWith("-result.json")) continue;
    const r = JSON.parse(readFileSync(join(dir, f), "utf8"));
    r.file = f;
    r.reportId = md5(r.uuid);
    r.part = label(r, "part");
    out.push(r);
  }
  // a re-run case (a retry) keeps only its last result, as the report does
  const byHistory = new Map();
  for (const r of out.sort((a, b) => (a.start ?? 0) - (b.start ?? 0))) byHistory.set(r.historyId ?? r.uuid, r);
  return [...byHistory.values()];
}

function attachment(dir, r, name) {
  const a = r.attachments?.find((x) => x.name === name);
  if (!a || !existsSync(join(dir, a.source))) return null;
  return JSON.parse(readFileSync(join(dir, a.source), "utf8"));
}

/** A part's counts, and every skipped case with the reason it gives (a skip without one says so). */
function counts(rs) {
  const c = { total: rs.length, passed: 0, failed: 0, skipped: 0, skips: [] };
  for (const r of rs) {
    if (failed(r)) c.failed++;
    else if (r.status === "passed") c.passed++;
    else {
      c.skipped++;
      c.skips.push({ id: r.reportId, name: r.name, reason: (r.statusDetails?.message ?? "").split("\n")[0].trim() || null });
    }
  }
  return c;
}

/** A case's key across runs: Allure 3 keys its history by ids of its own, a case is its full name and its name. */
const caseKey = (r) => `${r.fullName ?? ""} ${r.name}`;

// a history line longer than this is no run Allure wrote: skipped unread
const HISTORY_LINE_MAX = 16 << 20;

/** Why a history line is not a run Allure wrote, or null when it is one: UTF-8 JSON of an object with a finite timestamp and testResults. */
function badHistoryLine(buf) {
  if (buf.length > HISTORY_LINE_MAX) return `${buf.length} bytes, more than ${HISTORY_LINE_MAX}`;
  let v;
  try {
    v = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(buf));
  } catch (e) {
    return e instanceof TypeError ? "not UTF-8 text" : "not JSON";
  }
  if (v === null || typeof v !== "object" || Array.isArray(v)) return `a JSON ${Array.isArray(v) ? "array" : v === null ? "null" : typeof v}, not a run`;
  if (!Number.isFinite(v.timestamp)) return "no finite timestamp";
  if (v.testResults === null || typeof v.testResults !== "object" || Array.isArray(v.testResults)) return "no testResults object";
  return null;
}

/**
 * Allure's history (one JSON data point a line), its bad lines skipped and never fatal: each is moved to
 * HISTORY.skipped (kept, not lost) and the history rewritten without it, so Allure, which reads every line, reads
 * good ones only. Returns the last run, as case key -> test result, and a note per skipped line for the report.
 */
function readHistory(historyFile) {
  const none = { previous: null, skipped: [] };
  if (!historyFile || !existsSync(historyFile)) return none;
  if (!statSync(historyFile).isFile()) return { previous: null, skipped: [`${historyFile} is not a regular file: no history read`] };
  const all = readFileSync(historyFile);
  const good = [], bad = [], skipped = [];
  let line = 0;
  for (let at = 0; at < all.length; ) {
    let end = all.indexOf(0x0a, at);
    if (end < 0) end = all.length;
    const buf = all.subarray(at, end);
    line++;
    at = end + 1;
    if (buf.toString("latin1").trim() === "") continue;
    const why = badHistoryLine(buf);
    if (why) {
      bad.push(buf);
      skipped.push(`line ${line}: ${why}`);
    } else good.push(buf);
  }
  if (bad.length) {
    appendFileSync(`${historyFile}.skipped`, Buffer.concat(bad.flatMap((b) => [b, Buffer.from("\n")])));
    writeFileSync(`${historyFile}.tmp`, Buffer.concat(good.flatMap((b) => [b, Buffer.from("\n")])));
    renameSync(`${historyFile}.tmp`, historyFile);
  }
  if (good.length === 0) return { previous: null, skipped };
  const last = JSON.parse(good[good.length - 1].toString("utf8"));
  return { previous: { timestamp: last.timestamp, results: new Map(Object.values(last.testResults).map((r) => [caseKey(r), r])) }, skipped };
}

/**
 * The runs the trend compares, one JSON line each beside Allure's history (HISTORY.jsonl -> HISTORY.runs.jsonl):
 * when, the model, the reference and every layer case's worst ratio to budget. Allure's own history holds no
 * reference, so it cannot tell which earlier run measured the same thing.
 */
export const runsFile = (historyFile) => historyFile.replace(/(\.jsonl)?$/, ".runs.jsonl");

/** The runs kept beside the history; a line that is not one (not JSON, no reference, layers or worst ratios) is skipped with a note. */
function readRuns(historyFile, skipped) {
  const f = historyFile ? runsFile(historyFile) : null;
  if (!f || !existsSync(f) || !statSync(f).isFile()) return [];
  const runs = [];
  readFileSync(f, "utf8").split("\n").forEach((l, i) => {
    if (!l.trim()) return;
    let v = null;
    try {
      v = JSON.parse(l);
    } catch {}
    const ok = v && typeof v === "object" && Number.isFinite(v.timestamp) && typeof v.reference === "string" && Array.isArray(v.layers)
      && v.worst && typeof v.worst === "object" && !Array.isArray(v.worst);
    if (ok) runs.push(v);
    else skipped.push(`${f} line ${i + 1}: not a run (the trend does not read it)`);
  });
  return runs;
}

const sameLayers = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);

/**
 * The trend: this run against the last earlier run of the same reference over the same layers (like with like;
 * the model may differ: a port before and after a change), or what there is instead when none qualifies.
 */
export function trendOf(run, runs) {
  const trend = { factor: TREND_FACTOR, previous: null, previousModel: null, grew: [], nothing: null };
  if (run.layers.length === 0) {
    trend.nothing = "this run compared no layer";
    return trend;
  }
  const prev = [...runs].reverse().find((p) => p.reference === run.reference && sameLayers(p.layers, run.layers));
  if (!prev) {
    const last = runs[runs.length - 1];
    trend.nothing = runs.length === 0
      ? "no earlier run in this history"
      : `no earlier run of the same reference over the same ${run.layers.length} layers (the last, ${new Date(last.timestamp).toISOString()}, ` +
        (last.layers.length === 0 ? "compared no layer" : last.reference !== run.reference ? `was against ${last.reference}` : `compared ${last.layers.length} layers`) + ")";
    return trend;
  }
  trend.previous = new Date(prev.timestamp).toISOString();
  if (prev.model !== run.model) trend.previousModel = prev.model;
  for (const [name, now] of Object.entries(run.worst)) {
    const before = prev.worst[name];
    if (Number.isFinite(before) && Number.isFinite(now) && now > before * TREND_FACTOR) {
      trend.grew.push({ name, before, now, growth: before > 0 ? now / before : Infinity, inBudget: now <= 1 });
    }
  }
  trend.grew.sort((a, b) => layerOf(a.name) - layerOf(b.name));
  return trend;
}

/**
 * The runs whose results this report shows: every k3-run-<id>-plan.json in the folder (only K3_RUN_ID's when set), each
 * with the verdict file it wrote (docs/report.md, "Plan and verdict"). The verdict is the runs' own, never recomputed
 * here: INCOMPLETE when a run wrote no verdict or any run's is INCOMPLETE, else DOES NOT CONFORM when any run's is, else
 * CONFORMS when any run checked a checkpoint, else NO CHECKPOINT CHECKED.
 */
export function runsOf(dir, only) {
  const runs = new Map();
  for (const f of readdirSync(dir)) {
    const m = /^k3-run-(.+)-(plan|verdict)\.json$/u.exec(f);
    if (!m || (only && m[1] !== only)) continue;
    let v;
    try {
      v = JSON.parse(readFileSync(join(dir, f), "utf8"));
    } catch (e) {
      v = { unreadable: String(e.message) };
    }
    runs.set(m[1], { ...runs.get(m[1]), [m[2]]: v });
  }
  return runs;
}

export function combinedVerdict(runs, only) {
  const findings = [], notJudged = [];
  let outcome = null;
  const rank = { INCOMPLETE: 3, DOES_NOT_CONFORM: 2, CONFORMS: 1, NO_CHECKPOINT: 0 };
  const worse = (o) => (outcome === null || rank[o] > rank[outcome] ? o : outcome);
  if (runs.size === 0) {
    outcome = "INCOMPLETE";
    findings.push(only ? `no plan of run ${only} in the results: the build failed before any gate ran, or these results are another run's`
      : "no run plan in the results: they come from no run of this harness (stale, or the build failed before any gate ran)");
  }
  for (const [id, r] of runs) {
    if (!r.plan || !r.verdict || r.plan.unreadable || r.verdict.unreadable || !(r.verdict.outcome in rank)) {
      outcome = worse("INCOMPLETE");
      findings.push(`run ${id} wrote ${!r.plan ? "no plan" : "no readable verdict"}: it ended before its first case was written, or its files are damaged`);
      notJudged.push(...(r.plan?.items ?? []));
      continue;
    }
    outcome = worse(r.verdict.outcome);
    findings.push(...(r.verdict.findings ?? []));
    notJudged.push(...(r.verdict.not_judged ?? []));
  }
  const words = { INCOMPLETE: "INCOMPLETE", DOES_NOT_CONFORM: "DOES NOT CONFORM", CONFORMS: "CONFORMS", NO_CHECKPOINT: "NO CHECKPOINT CHECKED" }[outcome];
  return { outcome, words, findings, notJudged };
}

function prepare(dir, storyFile, historyFile) {
  const only = process.env.K3_RUN_ID || null;
  const runs = runsOf(dir, only);
  const decided = combinedVerdict(runs, only);
  const all = readResults(dir);
  // results of another run (stale allure-results, a failed build's leftovers) are never shown as this run's
  const results = all.filter((r) => runs.has(label(r, "run")));
  const stale = all.length - results.length;
  for (const r of all.filter((x) => !runs.has(label(x, "run")))) rmSync(join(dir, r.file), { force: true });
  const byPart = (p) => results.filter((r) => r.part === p);
  const layerCases = byPart(PART.layers).filter((r) => !Number.isNaN(layerOf(r.name)));
  const layers = layerCases
    .map((r) => ({ r, m: attachment(dir, r, "stage metrics") }))
    .map(({ r, m }) => ({ r, id: r.reportId, key: caseKey(r), name: r.name, layer: layerOf(r.name), failed: failed(r), metrics: m }))
    .sort((a, b) => a.layer - b.layer);
  const story = results.filter((r) => STORY_PARTS.includes(r.part));

  let first = null;
  const badModel = byPart(PART.model).find(failed);
  const badLayer = layers.find((l) => l.failed);
  const badExperts = byPart(PART.experts).filter(failed).filter((r) => !Number.isNaN(layerOf(r.name))).sort((a, b) => layerOf(a.name) - layerOf(b.name))[0];
  const badLogits = byPart(PART.logits).find(failed);
  if (badModel) first = { id: badModel.reportId, where: badModel.name, stage: "-", category: category(badModel), message: firstLine(badModel) };
  else if (badLayer) {
    const m = badLayer.metrics ?? {};
    const stage = m.first_over_budget ?? "-";
    const st = (m.stages ?? []).find((s) => s.stage === stage);
    first = { id: badLayer.id, where: badLayer.name, layer: badLayer.layer, stage, ratio: st?.ratio_to_budget ?? m.worst_ratio_to_budget, category: tagOf(m.finding), diagnosis: m.diagnosis ?? null };
  } else if (badExperts) first = { id: badExperts.reportId, where: badExperts.name, stage: "experts", category: category(badExperts), message: firstLine(badExperts) };
  else if (badLogits) first = { id: badLogits.reportId, where: decided.outcome === "INCOMPLETE" ? "logits (not every layer was judged: the cause may be one of them)" : "logits (every layer within budget)", stage: "-", category: category(badLogits), message: firstLine(badLogits) };

  // model and reference first: the trend compares runs of the same reference over the same layers
  const env = readEnvironment(dir);
  const param = (r, n) => r?.parameters?.find((x) => x.name === n)?.value;
  const match = byPart(PART.model).find((r) => r.name === "the reference dump matches the model");
  const model = param(match, "candidate") ?? param(match, "model") ?? (env["k3.candidate"] && env["k3.candidate"] !== "-" ? env["k3.candidate"] : env["k3.model"] ?? "-");
  const reference = param(match, "reference") ?? env["k3.reference"] ?? "-";
  const run = {
    timestamp: Date.now(), model, reference, layers: layers.map((l) => l.layer),
    worst: Object.fromEntries(layers.map((l) => [l.name, l.metrics?.worst_ratio_to_budget ?? Number(label(l.r, WORST_LABEL))])),
  };
  // Allure's history read first: its bad lines are moved aside before Allure reads it (readHistory)
  const history = readHistory(historyFile);
  const skipped = [...history.skipped];
  const trend = historyFile ? trendOf(run, readRuns(historyFile, skipped)) : { factor: TREND_FACTOR, previous: null, grew: [], nothing: null, noHistory: true };
  trend.skipped = skipped;
  const idOf = new Map(layers.map((l) => [l.name, l.id]));
  for (const g of trend.grew) g.id = idOf.get(g.name);
  // an INCOMPLETE run joins neither history: it is no measurement to compare against
  if (historyFile && decided.outcome !== "INCOMPLETE") appendFileSync(runsFile(historyFile), JSON.stringify(run) + "\n");

  // what the harness catches: every planted wrong port's row, as the gates that planted it attached it
  const catches = [];
  for (const r of results) {
    for (const a of (r.attachments ?? []).filter((x) => x.name === "caught")) {
      if (!existsSync(join(dir, a.source))) continue;
      const c = JSON.parse(readFileSync(join(dir, a.source), "utf8"));
      catches.push({ ...c, id: r.reportId, gate: /(\w+Gate)\./.exec(r.fullName ?? "")?.[1] ?? "-", failed: failed(r) });
    }
  }
  const KINDS = ["torch mutant", "wrong port", "binding mutant", "expert corruption", "tampered dump", "edited trunk"];
  catches.sort((a, b) => KINDS.indexOf(a.kind) - KINDS.indexOf(b.kind) || a.gate.localeCompare(b.gate) || a.planted.localeCompare(b.planted));

  const verdict = decided.words;
  // the model and the reference as the checkpoint gate's first case names them (the environment file is the last
  // profile's when several runs share a results folder), else as the environment says (above)
  const s = {
    verdict,
    model,
    reference,
    outcome: decided.outcome,
    findings: decided.findings,
    notJudged: decided.notJudged,
    runs: [...runs.keys()],
    stale,
    history: decided.outcome !== "INCOMPLETE",
    first,
    failingLayers: layers.filter((l) => l.failed).map((l) => ({ id: l.id, name: l.name })),
    // each part's counts are its whole branch of the tree (the overview case among the layers), so they agree with its badges
    counts: {
      model: counts(byPart(PART.model)),
      layers: counts(byPart(PART.layers)),
      experts: counts(byPart(PART.experts)),
      logits: counts(byPart(PART.logits).filter((r) => !/greedy/.test(r.name))),
      greedy: counts(byPart(PART.logits).filter((r) => /greedy/.test(r.name))),
      gates: counts(byPart(PART.gates)),
      harness: counts(byPart(PART.harness)),
    },
    trend,
    catches,
  };
  writeFileSync(storyFile, JSON.stringify(s, null, 2));

  // each failing logits case links to the first divergence (the symptom to its cause)
  if (first) {
    for (const r of byPart(PART.logits).filter(failed)) {
      const text = "first divergence: " + first.where.replaceAll("\u2007", "") + (first.stage !== "-" ? " " + first.stage : "");
      r.links = [...(r.links ?? []).filter((l) => !l.name?.startsWith("first divergence")), { name: text, url: "#" + first.id, type: "link" }];
      const { file, reportId, part, ...raw } = r;
      writeFileSync(join(dir, file), JSON.stringify(raw));
    }
  }
}

function readEnvironment(dir) {
  const f = join(dir, "environment.properties");
  if (!existsSync(f)) return {};
  return Object.fromEntries(readFileSync(f, "utf8").split("\n").filter((l) => l.includes("=")).map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1).replaceAll("\\\\", "\\")]));
}

const TAGS = { BINDING_ERROR: "binding error", WRONG_FORMULA: "wrong constant or formula", PRECISION: "precision", ROUNDING_DRIFT: "rounding drift", NON_FINITE: "non-finite", MISSING_TENSOR: "missing tensor", MISSING_STAGE: "missing stage", REFERENCE_MISMATCH: "reference mismatch", NEAR_TIE: "near-tie" };
const tagOf = (finding) => TAGS[finding] ?? (finding ? finding.toLowerCase().replaceAll("_", " ") : "-");
const category = (r) => /^\s*\[([^\]]+)\]/.exec(r.statusDetails?.message ?? "")?.[1] ?? (r.status === "broken" ? "broken" : "failed");
const firstLine = (r) => (r.statusDetails?.message ?? "").split("\n")[0];

const esc = (s) => String(s ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);

// a skip reason longer than this is shown cut, whole in its title: the story stays a first screen
const SKIP_REASON = 110;

function countLine(name, c, noun = "pass") {
  if (c.total === 0) return "";
  const cls = c.failed ? "k3-bad" : "k3-ok";
  // a long reason (an assumption listing every width) is cut to its first line's start; the whole is its title and on the case's page
  const short = (r) => (r.length > SKIP_REASON ? r.slice(0, SKIP_REASON).trimEnd() + " …" : r);
  const skips = c.skips.map((k) => `<a href="#${esc(k.id)}">${esc(k.name)}</a>: ${k.reason ? `<span title="${esc(k.reason)}">${esc(short(k.reason))}</span>` : "<b>no reason given</b>"}`).join("; ");
  return `<span class="${cls}" data-k3-count="${esc(name)}" data-k3-failed="${c.failed}" data-k3-total="${c.total}"><b>${esc(name)}</b> ${c.passed}/${c.total} ${noun}` +
    `${c.failed ? `, ${c.failed} fail` : ""}</span>${c.skipped ? ` <span data-k3-skipped="${c.skipped}">(${c.skipped} skipped: ${skips})</span>` : ""}`;
}

// lists longer than this show their first FOLD items and fold the rest under "and N more" (in the same order)
export const FOLD = 6;
function folded(items, attr) {
  if (items.length <= FOLD) return items.join(", ");
  return `${items.slice(0, FOLD).join(", ")} <details class="k3-more" ${attr}><summary>and ${items.length - FOLD} more</summary>${items.slice(FOLD).join(", ")}</details>`;
}

export function panel(s) {
  const bad = s.verdict === "DOES NOT CONFORM";
  const f = s.first;
  const incomplete = s.outcome === "INCOMPLETE";
  const firstHtml = s.outcome === "NO_CHECKPOINT"
    ? "no checkpoint was checked in this run"
    : incomplete && !f
    ? "not known: the run did not judge everything it planned"
    : f
    ? `<a href="#${esc(f.id)}" data-k3-first>${esc(f.where.replaceAll("\u2007", ""))}</a> · stage <b>${esc(f.stage)}</b> · <b>[${esc(f.category)}]</b>${f.ratio !== undefined ? ` · ${esc(fmt(f.ratio))}x budget` : ""}${f.message ? ` · ${esc(f.message)}` : ""}`
    : "none: every stage of every layer, the logits and the greedy ids are within budget";
  const diag = f?.diagnosis ? esc(f.diagnosis) : f ? "(bisect diagnoses a failing layer; the first divergence is not a layer)" : "nothing to diagnose";
  // in layer order, the first divergence first; a long list folds after the first few, never hiding an earlier layer
  const failing = s.failingLayers.length > 1
    ? ` (failing layers: ${folded(s.failingLayers.map((l) => `<a href="#${esc(l.id)}">${esc(l.name.replaceAll("\u2007", ""))}</a>`), "data-k3-failing-more")})`
    : "";
  const c = s.counts;
  const countsHtml = [
    countLine("model", c.model),
    countLine("layers", c.layers) + failing,
    countLine("experts", c.experts),
    countLine("logits", c.logits),
    countLine("greedy ids", c.greedy),
    countLine("engine gates", c.gates),
    countLine("harness self-tests", c.harness),
  ].filter(Boolean).join(" · ");
  const t = s.trend;
  const since = t.previous ? `since the run of ${esc(t.previous)} (same reference, same layers${t.previousModel ? `; its model was ${esc(t.previousModel)}` : ""})` : "";
  const trendHtml = t.noHistory
    ? `no history kept (ci/report K3_REPORT_HISTORY=FILE keeps one)`
    : t.nothing
      ? `<span data-k3-trend-nothing>nothing to compare: ${esc(t.nothing)}</span>`
      : t.grew.length === 0
        ? `<span data-k3-trend-same>no layer's worst ratio grew more than ${t.factor}x ${since}</span>`
        : `<span class="k3-warn" data-k3-trend>${t.grew.length} layer${t.grew.length > 1 ? "s" : ""} got worse by more than ${t.factor}x ${since}:</span> ` +
          folded(t.grew.map((g) => `<a href="#${esc(g.id)}">${esc(g.name.replaceAll("\u2007", ""))}</a> ${esc(fmt(g.before))} → ${esc(fmt(g.now))}x budget (${esc(fmt(g.growth))}x${g.inBudget ? ", still within budget" : ""})`), "data-k3-trend-more");
  const skippedHtml = (t.skipped ?? []).length === 0 ? ""
    : ` <span class="k3-warn" data-k3-history-skipped>${t.skipped.length} history line${t.skipped.length > 1 ? "s" : ""} skipped (moved to the history's .skipped file): ${esc(t.skipped.slice(0, 5).join("; "))}${t.skipped.length > 5 ? "; …" : ""}</span>`;
  const missed = s.catches.filter((c) => !c.category || c.failed);
  const catchesHtml = s.catches.length === 0
    ? "no planted wrong port in this run (the mutation, experts, faults and ports gates plant them)"
    : `<details data-k3-catches><summary><span class="${missed.length ? "k3-bad" : "k3-ok"}">${s.catches.length} planted wrong ports, ${s.catches.length - missed.length} caught` +
      `${missed.length ? `, <b>${missed.length} not caught</b>` : ""}</span> (show the table)</summary><table><tr><th>planted</th><th>kind</th><th>gate</th><th>layer</th><th>stage</th><th>category</th><th>ratio to budget</th></tr>` +
      s.catches.map((c) => `<tr class="${!c.category || c.failed ? "k3-miss" : ""}"><td><a href="#${esc(c.id)}">${esc(c.planted)}</a></td><td>${esc(c.kind)}</td><td>${esc(c.gate)}</td><td>${c.layer === null || c.layer === undefined ? "-" : "L" + esc(c.layer)}</td>` +
        `<td>${esc(c.stage ?? "-")}</td><td>${c.category ? esc(c.category) : "<b>NOT CAUGHT</b>"}${c.category && c.failed ? " (its case fails)" : ""}</td><td>${c.ratio_to_budget === null || c.ratio_to_budget === undefined ? "-" : esc(typeof c.ratio_to_budget === "number" ? fmt(c.ratio_to_budget) + "x" : c.ratio_to_budget)}</td></tr>`).join("") +
      "</table></details>";
  return `<section id="k3-story" data-verdict="${esc(s.verdict)}">
<div class="k3-head"><span class="k3-verdict ${bad || incomplete ? "k3-bad" : s.verdict === "CONFORMS" ? "k3-ok" : ""}" data-k3-verdict>${esc(s.verdict)}</span>
${s.model === "-" ? "" : `<span class="k3-model">${esc(s.model)} against ${esc(s.reference.replace(/ \(found.*$/, ""))}</span>`}</div>
<dl>
${incomplete ? `<dt class="k3-keep">not judged</dt><dd class="k3-keep k3-bad" data-k3-missing>${esc(s.findings.join("; "))}</dd>` : ""}
${s.stale ? `<dt>left out</dt><dd data-k3-stale>${s.stale} result${s.stale > 1 ? "s" : ""} of another run (not this run's plan)</dd>` : ""}
<dt class="k3-keep">first divergence</dt><dd class="k3-keep" data-k3-first-divergence>${firstHtml}</dd>
<dt>bisect</dt><dd data-k3-bisect>${diag}</dd>
<dt>counts</dt><dd>${countsHtml}</dd>
<dt>trend</dt><dd>${trendHtml}${skippedHtml}</dd>
<dt>the harness catches</dt><dd>${catchesHtml}</dd>
</dl>
</section>
<script>
  // on a case's page (the report's hash route) the story shrinks to the verdict and the first divergence
  (() => { const s = document.getElementById("k3-story"), f = () => s.classList.toggle("k3-compact", location.hash.length > 1); addEventListener("hashchange", f); f(); })();
</script>`;
}

const STYLE = `<style id="k3-story-style">
#k3-story{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;max-width:1100px;margin:12px auto 0;padding:14px 20px;border-radius:8px;background:#fff;border:1px solid #d0d7de;color:#1f2328}
#k3-story .k3-head{display:flex;align-items:baseline;gap:16px;flex-wrap:wrap}
#k3-story .k3-verdict{font-size:28px;font-weight:700;letter-spacing:.02em}
#k3-story .k3-model{color:#57606a}
#k3-story dl{display:grid;grid-template-columns:130px 1fr;gap:4px 12px;margin:10px 0 0}
#k3-story dt{color:#57606a}#k3-story dd{margin:0}
#k3-story .k3-bad{color:#c62828}#k3-story .k3-ok{color:#1b7f3b}#k3-story .k3-warn{color:#b35c00;font-weight:600}
#k3-story a{color:#0550ae}
#k3-story details table{border-collapse:collapse;margin-top:6px;font-size:12px;width:100%}#k3-story td,#k3-story th{border:1px solid #d0d7de;padding:2px 6px;text-align:left}
#k3-story tr.k3-miss td{background:#fde2e1}#k3-story summary{cursor:pointer}
#k3-story.k3-compact{display:flex;align-items:baseline;gap:16px;padding:6px 20px;margin-top:6px}
#k3-story.k3-compact .k3-verdict{font-size:18px}#k3-story.k3-compact .k3-model{display:none}
#k3-story.k3-compact dl{margin:0;display:flex;gap:8px}#k3-story.k3-compact dl>:not(.k3-keep){display:none}
#app article[class*="styles_chart__"]{display:none!important}
#app header{position:static!important}
#k3-story details.k3-more{display:inline}#k3-story details.k3-more[open]{display:block}#k3-story details.k3-more summary{display:inline;color:#0550ae}
#k3-file-banner{font:14px/1.45 system-ui,sans-serif;max-width:1100px;margin:12px auto 0;padding:10px 20px;border-radius:8px;background:#fff4e5;border:1px solid #b35c00;color:#1f2328}
</style>`;

// the folder copy loads its data by fetch, which file:// forbids: said at once instead of a spinner that never stops
const FILE_BANNER = `<script>
  if (location.protocol === "file:") document.addEventListener("DOMContentLoaded", () => {
    const b = document.createElement("div"); b.id = "k3-file-banner"; b.setAttribute("data-k3-file-banner", "");
    b.innerHTML = "This folder copy of the report loads its data over HTTP and cannot open from file://. Open the single file beside it, <a href='../" +
      location.pathname.split("/").slice(-2, -1)[0] + ".html'>" + location.pathname.split("/").slice(-2, -1)[0] + ".html</a>, or serve this folder (python3 -m http.server -d FOLDER).";
    document.body.prepend(b);
  });
</script>`;

/**
 * The harness's results are deterministic: a status that changes between runs is a change of inputs, not a flaky
 * test. Allure marks a failure flaky when its history holds a pass after an earlier failure; the mark (and the
 * flaky counts) are taken out of the report's data, the folder's files and the single file's embedded copies alike.
 */
const unflake = (json) => json.replace(/"flaky":true/g, '"flaky":false').replace(/,"flaky":\d+/g, "").replace(/"flaky":\d+,/g, "");
function deflakeFolder(dir) {
  for (const f of readdirSync(dir)) {
    const p = join(dir, f);
    if (statSync(p).isDirectory()) deflakeFolder(p);
    else if (f.endsWith(".json")) {
      const t = readFileSync(p, "utf8"), u = unflake(t);
      if (u !== t) writeFileSync(p, u);
    }
  }
}
const deflakeSingle = (page) => page.replace(/d\("([^"]+\.json)","([A-Za-z0-9+/=]+)"\)/g, (m, name, b64) => {
  const t = Buffer.from(b64, "base64").toString("utf8"), u = unflake(t);
  return u === t ? m : `d("${name}","${Buffer.from(u, "utf8").toString("base64")}")`;
});

function inject(storyFile, files) {
  const s = JSON.parse(readFileSync(storyFile, "utf8"));
  const html = panel(s);
  for (const f of files) {
    const folder = existsSync(join(f, "..", "data"));
    if (folder) deflakeFolder(join(f, ".."));
    let page = readFileSync(f, "utf8");
    if (!page.includes('<div id="app"></div>')) throw new Error(`${f}: no <div id="app"></div> to put the story above`);
    // the story above Allure's app, whose pass-rate ring (a percentage as the headline) it hides; Allure's page-view beacon (an external script) removed: a report opens offline
    page = page.replace(/<script async src="https:\/\/www\.googletagmanager\.com[\s\S]*?<\/script>\s*<script>[\s\S]*?gtag\('config'[\s\S]*?<\/script>/, "");
    page = page.replace("</head>", `${STYLE}\n</head>`).replace('<div id="app"></div>', `${html}\n<div id="app"></div>`);
    page = page.replace(/<title>[^<]*<\/title>/, `<title>${esc(s.verdict)} · k3j conformance</title>`);
    page = folder ? page.replace("</head>", `${FILE_BANNER}\n</head>`) : deflakeSingle(page);
    writeFileSync(f, page);
  }
}

const [cmd, ...args] = process.argv.slice(2);
if (cmd === "prepare") prepare(args[0], args[1], args[2]);
else if (cmd === "inject") inject(args[0], args.slice(1));
else if (cmd) {
  console.error("usage: report-story.mjs prepare RESULTS STORY.json [HISTORY.jsonl] | inject STORY.json INDEX.html...");
  process.exit(2);
}
