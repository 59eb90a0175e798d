import { defineConfig } from "allure";
import { readFileSync } from "node:fs";

// Allure 3 takes categories from its config, not from categories.json in the results folder:
// load the committed reports/categories.json (the "[binding error]" ... message tags) here.
// Its regexes are JavaScript's: the Java-style "(?s)" (dot matches newlines) prefix becomes [\s\S].
const javaToJs = (re) => (re?.startsWith("(?s)") ? re.slice(4).replaceAll(".*", "[\\s\\S]*") : re);
const categories = JSON.parse(readFileSync(new URL("../reports/categories.json", import.meta.url), "utf8")).map((c) => ({
  ...c,
  ...(c.messageRegex !== undefined && { messageRegex: javaToJs(c.messageRegex) }),
  ...(c.traceRegex !== undefined && { traceRegex: javaToJs(c.traceRegex) }),
}));

// The folder report (served over HTTP: its data files load by fetch) and the same report as one HTML file to attach
// anywhere (it opens from file://); ci/report moves them to OUT/ and OUT.html and puts the story above both.
const awesome = {
  reportLanguage: "en",
  reportName: "k3j conformance",
  // the part first (1 · model, 2 · layers, ... 6 · harness self-tests: the harness's ReportPart), then the gate's own groups
  groupBy: ["part", "epic", "feature", "story"],
  // by name: the parts in causal order, inside a part the "failing" group before the "passing" one, and the layers
  // in numeric order ("L 2" before "L10", the harness pads with a figure space). Allure's status order would put
  // the part with the most failures first, the symptom (logits) above its cause (a layer)
  defaultSortBy: "name,asc",
};

export default defineConfig({
  name: "k3j conformance",
  output: process.env.K3_REPORT_OUT ?? "../reports/allure-report",
  // Allure's history: each report appends its run, and the next one compares with it (ci/report K3_REPORT_HISTORY)
  ...(process.env.K3_REPORT_HISTORY && { historyPath: process.env.K3_REPORT_HISTORY }),
  categories,
  plugins: {
    folder: { import: "@allurereport/plugin-awesome", options: { ...awesome, singleFile: false } },
    single: { import: "@allurereport/plugin-awesome", options: { ...awesome, singleFile: true } },
  },
});
