// What both openai client test files drive: the coordinator's HTTP API as
// tests/http/openai_http_test.sh started it ($SPECSERVE_BASE_URL, with
// $SPECSERVE_API_KEY), through the official client, and the model it serves.
import OpenAI from 'openai';

export const env = process.env;
export const client = new OpenAI({
  baseURL: env.SPECSERVE_BASE_URL,
  apiKey: env.SPECSERVE_API_KEY,
  maxRetries: 0,
  timeout: 120_000,
});
export const model = (await client.models.list()).data[0].id;
