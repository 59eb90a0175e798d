// The report, checked in a real browser (Debian's headless Chromium, driven by playwright-core): for each report
// given, at 1400x900 and without scrolling, the verdict and the first divergence are on screen, the layers are in
// numeric order (L2 before L10) with the failing ones first, a failing layer's page shows its whole stage table,
// and the single file beside the folder opens from file:// with the same first screen.
//   node report-browser.mjs [--shots DIR] [--worse LAYER] [--catches] EXPECTED=REPORT_DIR ...
//     EXPECTED is the verdict the report must show: "fail" (DOES NOT CONFORM), "pass" (CONFORMS), "incomplete"
//     (INCOMPLETE, an interrupted run: what was not judged, layers by name, on the first screen) or "noverdict" (NO
//     VERDICT: a run killed before its first case, which must not show an earlier run's verdict);
//     REPORT_DIR is ci/report's folder (REPORT_DIR.html is its single file); --worse LAYER: a failing report's trend
//     (against the previous run in its history) marks that layer as worse; --catches: a passing report lists the
//     planted wrong ports (mutation, experts, faults and ports gates) and every one is caught; --candidate: the reports
//     are a candidate's, whose bisect line says bisect does not apply and how to confirm a binding; --layers N: a
//     report's layers count is N layers; --tag T: screenshots named T-*.png. Exit 1 when any property is broken.
import { createReadStream, existsSync, mkdirSync, statSync } from "node:fs";
import { createServer } from "node:http";
import { extname, join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { chromium } from "playwright-core";

const VIEW = { width: 1400, height: 900 };
// the sizes the sticky parts of the page must not clip the title card and the tab strip at
const SIZES = [VIEW, { width: 1920, height: 1080 }];
const VERDICT = { fail: "DOES NOT CONFORM", pass: "CONFORMS", incomplete: "INCOMPLETE", noverdict: "NO VERDICT" };
const args = process.argv.slice(2);
let shots = null, worse = null, catches = false, candidate = false, layerCount = null, tag = "";
const reports = [];
for (let i = 0; i < args.length; i++) {
  if (args[i] === "--shots") shots = resolve(args[++i]);
  else if (args[i] === "--worse") worse = args[++i];
  else if (args[i] === "--catches") catches = true;
  else if (args[i] === "--candidate") candidate = true;
  else if (args[i] === "--layers") layerCount = Number(args[++i]);
  else if (args[i] === "--tag") tag = args[++i] + "-";
  else {
    const [expect, dir] = args[i].split("=");
    if (!VERDICT[expect] || !dir) usage();
    // a second report of the same expectation gets its own screenshots (fail-2-overview.png)
    const n = reports.filter((r) => r.expect === expect).length;
    reports.push({ expect, dir: resolve(dir), shot: `${expect}${n ? "-" + (n + 1) : ""}` });
  }
}
if (reports.length === 0) usage();
function usage() {
  console.error("usage: report-browser.mjs [--shots DIR] [--worse LAYER] [--catches] [--candidate] [--layers N] [--tag T] fail|pass|incomplete|noverdict=REPORT_DIR ...");
  process.exit(2);
}
if (shots) mkdirSync(shots, { recursive: true });

let failures = 0;
const check = (ok, what) => {
  console.log(`${ok ? "ok  " : "FAIL"} ${what}`);
  if (!ok) failures++;
  return ok;
};

/** The folder report over HTTP (its data files load by fetch, which file:// forbids). */
function serve(dir) {
  const types = { ".html": "text/html", ".js": "text/javascript", ".json": "application/json", ".css": "text/css", ".svg": "image/svg+xml", ".txt": "text/plain" };
  const server = createServer((req, res) => {
    const path = join(dir, decodeURIComponent(new URL(req.url, "http://x").pathname));
    if (!path.startsWith(dir) || !existsSync(path) || !statSync(path).isFile()) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { "content-type": types[extname(path)] ?? "application/octet-stream" });
    createReadStream(path).pipe(res);
  });
  return new Promise((ok) => server.listen(0, "127.0.0.1", () => ok(server)));
}

/** Whether the element lies wholly inside the viewport as the page opened (no scrolling). */
async function onScreen(page, locator) {
  if ((await locator.count()) === 0) return false;
  const box = await locator.first().boundingBox();
  const scrollY = await page.evaluate(() => window.scrollY);
  return box !== null && scrollY === 0 && box.y >= 0 && box.y + box.height <= VIEW.height && box.x >= 0 && box.x + box.width <= VIEW.width;
}

const text = (s) => s.replaceAll("\u2007", "").replace(/\s+/g, " ").trim();

async function firstScreen(page, r, where) {
  // a run with no verdict has no results: no tree to wait for
  if (r.expect !== "noverdict") await page.locator("[data-testid=tree-section-title]").first().waitFor({ timeout: 120000 });
  else await page.locator("#k3-story").waitFor({ timeout: 120000 });
  await page.waitForTimeout(1500); // the tree settles (Allure may focus and scroll to a case)
  const verdict = page.locator("[data-k3-verdict]");
  check((await verdict.count()) === 1 && text(await verdict.innerText()) === VERDICT[r.expect], `${where}: the verdict reads ${VERDICT[r.expect]}`);
  check(await onScreen(page, verdict), `${where}: the verdict is visible without scrolling at ${VIEW.width}x${VIEW.height}`);
  const first = page.locator("[data-k3-first-divergence]");
  check(await onScreen(page, first), `${where}: the first divergence is visible without scrolling`);
  if (r.expect === "fail" && worse !== null) {
    const trend = page.locator("[data-k3-trend]");
    check(await onScreen(page, trend) && new RegExp(`\\b${worse} `).test(text(await trend.locator("xpath=..").innerText())), `${where}: the trend marks ${worse} as worse than in the previous run`);
  }
  if (r.expect === "pass" && catches) {
    const summary = text(await page.locator("[data-k3-catches] summary").innerText().catch(() => ""));
    const m = /^(\d+) planted wrong ports, (\d+) caught/.exec(summary);
    check(m !== null && Number(m[1]) > 0 && m[1] === m[2] && !/not caught/.test(summary), `${where}: what the harness catches lists every planted wrong port as caught: "${summary}"`);
  }
  if (r.expect === "fail") check(/L\d+ .* stage \S+ · \[[^\]]+\]/.test(text(await first.innerText())), `${where}: the first divergence names layer, stage and category: "${text(await first.innerText())}"`);
  // the story stays a first screen: long lists fold ("and N more"), so the panel never fills the page
  const storyBox = await page.locator("#k3-story").boundingBox();
  check(storyBox !== null && storyBox.height <= VIEW.height * 0.45, `${where}: the story panel is ${Math.round(storyBox?.height ?? -1)} px high, at most 45% of the screen (long lists folded)`);
  // every skip says why
  const skips = text(await page.locator("[data-k3-skipped]").allInnerTexts().then((t) => t.join(" | ")));
  check(!/no reason given/.test(skips), `${where}: every skipped case gives its reason${skips ? ": " + skips : " (none skipped)"}`);
  // the trend says what it compared, or that there was nothing to compare; never "no layer grew" against a run without layers
  if (r.expect !== "incomplete" && r.expect !== "noverdict") {
    const trend = text(await page.locator("[data-k3-trend-line]").innerText());
    check(/^(nothing to compare: |no history kept|no layer's outcome changed .* \(same engine and reference, same layers|\d+ layers? (conformed and no longer|now conform).* \(same engine and reference, same layers)/.test(trend), `${where}: the trend compares like with like or says there is nothing to compare: "${trend.slice(0, 160)}"`);
    // the trend never calls an in-budget change worse: the layers it marks worse are failing ones on this screen
    const worseNames = (await page.locator("[data-k3-trend] ~ a, [data-k3-trend] ~ details a").allInnerTexts().catch(() => [])).map(text);
    check(r.expect === "fail" || worseNames.length === 0, `${where}: a passing report marks no layer worse${worseNames.length ? ": " + worseNames.join(", ") : ""}`);
  }
  if (candidate && r.expect !== "noverdict") {
    const bisect = text(await page.locator("[data-k3-bisect]").innerText());
    check(/^does not apply to a candidate dump/.test(bisect) && /k3 corrupt/.test(bisect) && !/ are swapped$/.test(bisect), `${where}: a candidate's bisect line says bisect does not apply and how to confirm a binding: "${bisect.slice(0, 120)}"`);
  }
  if (layerCount !== null && r.expect !== "noverdict") {
    const total = Number(await page.locator("[data-k3-count=layers]").getAttribute("data-k3-total").catch(() => "NaN"));
    check(total === layerCount, `${where}: the layers count counts ${layerCount} layers (it says ${total})`);
  }
  if (r.expect === "noverdict") {
    const said = text(await page.locator("[data-k3-missing]").innerText().catch(() => ""));
    check(await onScreen(page, page.locator("[data-k3-missing]")) && /wrote no verdict/.test(said), `${where}: the first screen says the run wrote no verdict: "${said.slice(0, 160)}"`);
    check(!/CONFORMS/.test(text(await page.locator("#k3-story").innerText())), `${where}: no CONFORMS anywhere on the story of a run with no verdict`);
  }

  if (r.expect === "incomplete") {
    const missing = page.locator("[data-k3-missing]");
    const said = text(await missing.innerText().catch(() => ""));
    check(await onScreen(page, missing) && /planned but not judged: \d+ of \d+ \(.*\bL\d+\b/.test(said) && /did not end/.test(said),
      `${where}: what was not judged is on the first screen, naming layers: "${said.slice(0, 160)}"`);
    check(!/within budget/.test(text(await first.innerText())), `${where}: the first divergence claims nothing within budget: "${text(await first.innerText())}"`);
  }
  const percentages = await page.evaluate(({ h }) => [...document.querySelectorAll("body *")]
    .filter((e) => e.children.length === 0 && /^\s*\d+(\.\d+)?\s*%\s*$/.test(e.textContent))
    .filter((e) => { const b = e.getBoundingClientRect(); return b.width > 0 && b.height > 0 && b.top < h && getComputedStyle(e).visibility !== "hidden"; })
    .map((e) => e.textContent.trim()), { h: VIEW.height });
  check(percentages.length === 0, `${where}: no percentage on the first screen${percentages.length ? ": " + percentages.join(", ") : ""}`);
}

/** Every case title of the tree in the order shown, after opening the groups whose title matches {@code open}. */
async function treeTitles(page, open) {
  const done = new Set();
  for (let round = 0; round < 20; round++) {
    const titles = page.locator("[data-testid=tree-section-title]");
    let clicked = false;
    for (let i = 0; i < (await titles.count()); i++) {
      const title = titles.nth(i);
      const name = text(await title.innerText());
      if (!open.test(name) || done.has(name)) continue;
      done.add(name);
      // a group: its header row (tree-section) and, once opened, its children beside it in one wrapper
      const header = title.locator("xpath=ancestor::*[@data-testid='tree-section'][1]");
      if ((await header.locator("xpath=..").locator("[data-testid=tree-leaf]").count()) === 0) {
        await header.locator("[data-testid=tree-arrow]").first().click();
        await page.waitForTimeout(300);
        clicked = true;
        break;
      }
    }
    if (!clicked) break;
  }
  return (await page.locator("[data-testid=tree-leaf-title]").allInnerTexts()).map(text);
}

async function layerOrder(page, r) {
  const names = await treeTitles(page, /^(2 · layers|failing|passing)$/);
  // no Flaky mark on the cases now shown: the harness's results are deterministic
  const flaky = await page.locator("[data-testid=tree-leaf-flaky]").count();
  check(names.length > 0 && flaky === 0, `no case of the ${names.length} shown is marked flaky (${flaky} marks)`);
  if (process.env.K3_DEBUG) console.log(names.slice(0, 30));
  const layers = names.filter((x) => /^L\d+ /.test(x) && !/experts/.test(x));
  const at = (n) => layers.findIndex((x) => new RegExp(`^L${n} `).test(x));
  const l2 = at(2), l10 = at(10);
  check(l2 >= 0 && l10 >= 0 && l2 < l10, `the layers' tree lists L2 (at ${l2}) before L10 (at ${l10})`);
  const parts = (await page.locator("[data-testid=tree-section-title]").allInnerTexts()).map(text).filter((t) => /^\d · /.test(t));
  check(parts.join("|") === [...parts].sort().join("|"), `the parts follow cause to symptom: ${parts.join(", ")}`);
  if (r.expect === "fail") {
    const failing = await page.locator("[data-testid=tree-leaf]").filter({ has: page.locator("[data-testid=tree-leaf-status-failed]") }).allInnerTexts();
    const failingNames = failing.map(text).map((t) => t.replace(/^\d+\s*/, ""));
    const firstFailing = failingNames.find((x) => /^L\d+ /.test(x) && !/experts/.test(x));
    check(firstFailing !== undefined && at(Number(/^L(\d+)/.exec(firstFailing)[1])) === 0, `a failing layer (${firstFailing}) comes first among the layers`);
    const nums = failingNames.filter((x) => /^L\d+ /.test(x) && !/experts/.test(x)).map((x) => Number(/^L(\d+)/.exec(x)[1]));
    check(nums.length > 1 && nums.every((n, i) => i === 0 || nums[i - 1] < n), `the failing layers in the tree are in numeric order: ${nums.map((n) => "L" + n).join(", ")}`);
    // the story's list: the same layers in the same numeric order
    // textContent: the folded ones ("and N more") are in the list, closed
    const listed = (await page.locator("[data-k3-count=layers] ~ a, [data-k3-count=layers] ~ details a").allTextContents().catch(() => [])).map(text);
    const storyNums = listed.filter((x) => /^L\d+ /.test(x)).map((x) => Number(/^L(\d+)/.exec(x)[1]));
    check(storyNums.length === nums.length && storyNums.every((n, i) => n === nums[i]), `the story lists the failing layers as the tree does: ${storyNums.map((n) => "L" + n).join(", ")}`);
  }
  // the counts agree with the tree: the layers part's failing layer cases (a layer count counts layers: not the overview)
  const failedLeaves = await page.locator("[data-testid=tree-leaf]").filter({ has: page.locator("[data-testid=tree-leaf-status-failed]") }).allInnerTexts();
  const inLayers = failedLeaves.map(text).map((t) => t.replace(/^\d+\s*/, "")).filter((x) => /^L\d+ /.test(x) && !/experts/.test(x)).length;
  const said = Number(await page.locator("[data-k3-count=layers]").getAttribute("data-k3-failed").catch(() => "NaN"));
  check(said === inLayers, `the story's layers count (${said} failing) agrees with the tree's failing layers (${inLayers})`);
}

/** The title card and the tab strip, scrolled to the top of the window, are not covered by a sticky or fixed bar. */
async function noClipping(r, url, where) {
  for (const size of SIZES) {
    const context = await browser.newContext({ viewport: size });
    const page = await context.newPage();
    await page.goto(url, { timeout: 180000 });
    await page.locator("[data-testid=tree-section-title]").first().waitFor({ timeout: 120000 });
    await page.waitForTimeout(1000);
    for (const [name, locator] of [["title card", page.getByText("k3j conformance", { exact: true }).first()], ["tab strip", page.getByText(/^Results/).first()]]) {
      const covered = await locator.evaluate((el) => {
        el.scrollIntoView({ block: "start" });
        const b = el.getBoundingClientRect();
        const at = document.elementFromPoint(b.left + Math.min(b.width / 2, 40), b.top + Math.min(b.height / 2, 8));
        return at === null || !(el === at || el.contains(at) || at.contains(el)) ? (at?.tagName ?? "nothing") + "." + (at?.className ?? "") : null;
      }).catch((e) => "not found: " + e.message.split("\n")[0]);
      check(covered === null, `${where}: the ${name} scrolled to the top at ${size.width}x${size.height} is not clipped${covered ? " (covered by " + covered + ")" : ""}`);
    }
    if (shots) await page.screenshot({ path: join(shots, `${tag}${r.shot}-scrolled-${size.width}x${size.height}.png`) });
    await context.close();
  }
}

async function failingLayerPage(page, r, where) {
  await page.locator("[data-k3-first-divergence] a").first().click();
  await page.getByText(/stage\s+ratio\/budget/).first().waitFor({ timeout: 60000 });
  await page.waitForTimeout(800);
  // the whole table, from its header line to its last row (every stage, then the routing line), as the page opened
  const box = await page.evaluate(() => {
    const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    for (let n = walk.nextNode(); n; n = walk.nextNode()) {
      const t = n.data, at = t.search(/stage\s+ratio\/budget/);
      if (at < 0) continue;
      const end = t.indexOf("\n\n", at);
      const range = document.createRange();
      range.setStart(n, at);
      range.setEnd(n, end < 0 ? t.length : end);
      const b = range.getBoundingClientRect();
      return { top: b.top, bottom: b.bottom, rows: t.slice(at, end < 0 ? t.length : end).split("\n").length, scrollY: window.scrollY };
    }
    return null;
  });
  check(box !== null && box.scrollY === 0 && box.top >= 0 && box.bottom <= VIEW.height,
    `${where}: the failing layer's stage table (${box?.rows} lines) is visible without scrolling (${box ? Math.round(box.top) + "-" + Math.round(box.bottom) : "no table"} px of ${VIEW.height})`);
  if (shots) await page.screenshot({ path: join(shots, `${tag}${r.shot}-layer.png`) });
}

const browser = await chromium.launch({
  executablePath: process.env.K3_CHROMIUM ?? "/usr/bin/chromium",
  // headless (playwright's default) with a fresh profile of its own per launch
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
try {
  for (const r of reports) {
    console.log(`== ${r.expect}: ${r.dir}`);
    try {
      await checkReport(r);
    } catch (e) {
      check(false, `${r.expect}: ${e.message.split("\n")[0]}`);
    }
  }
} finally {
  await browser.close();
}
console.log(failures === 0 ? "report-browser: every property holds" : `report-browser: ${failures} properties broken`);
process.exit(failures === 0 ? 0 : 1);

async function checkReport(r) {
  {
    const server = await serve(r.dir);
    const url = `http://127.0.0.1:${server.address().port}/index.html`;
    const context = await browser.newContext({ viewport: VIEW });
    const page = await context.newPage();
    await page.goto(url);
    await firstScreen(page, r, "folder report");
    if (shots) await page.screenshot({ path: join(shots, `${tag}${r.shot}-overview.png`) });
    if (r.expect !== "incomplete" && r.expect !== "noverdict") await layerOrder(page, r);
    if (r.expect === "fail") await failingLayerPage(page, r, "folder report");
    await context.close();
    if (r.expect !== "noverdict") await noClipping(r, url, "folder report");
    server.close();

    // the folder copy from file:// cannot load its data: it says so and names the single file, never spins forever
    const c3 = await browser.newContext({ viewport: VIEW });
    const p3 = await c3.newPage();
    await p3.goto(pathToFileURL(join(r.dir, "index.html")).href, { timeout: 180000 });
    const banner = p3.locator("[data-k3-file-banner]");
    await banner.waitFor({ timeout: 30000 }).catch(() => {});
    check(await onScreen(p3, banner) && /\.html/.test(await banner.innerText()), `the folder copy opened from file:// names the single file at once`);
    await c3.close();

    const single = `${r.dir}.html`;
    if (check(existsSync(single), `the single-file report ${single} sits beside the folder`)) {
      const c2 = await browser.newContext({ viewport: VIEW });
      const p2 = await c2.newPage();
      await p2.goto(pathToFileURL(single).href, { timeout: 180000 }); // one file of several MB: slow to parse on a loaded machine
      await firstScreen(p2, r, "single file from file://");
      if (shots) await p2.screenshot({ path: join(shots, `${tag}${r.shot}-single-file.png`) });
      await c2.close();
    }
  }
}
