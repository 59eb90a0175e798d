// One client process of ci/serve-check: POST /v1/completions with the body given, print {status, body} as JSON.
// Usage: node ci/serve-client.mjs BASE_URL API_KEY BODY_JSON
import OpenAI from 'openai';

const [base, key, body] = process.argv.slice(2);
const ai = new OpenAI({ baseURL: base + '/v1', apiKey: key, maxRetries: 0, timeout: 300_000 });
try {
  const r = await ai.completions.create(JSON.parse(body));
  console.log(JSON.stringify({ status: 200, body: r }));
} catch (e) {
  if (e.status === undefined) throw e;
  console.log(JSON.stringify({ status: e.status, body: e.error }));
}
