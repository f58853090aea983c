// The official openai JavaScript client against specserve-coordinator's HTTP
// API. Run by tests/http/openai_http_test.sh, which starts the servers and
// records the gRPC API's answers for the same greedy requests in
// $SPECSERVE_WORK/grpc_*.json (the Python client's --json output).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import OpenAI from 'openai';
import { client, env, model } from './openai_server.mjs';

const grpc = (name) => JSON.parse(fs.readFileSync(`${env.SPECSERVE_WORK}/grpc_${name}.json`, 'utf8'));
const prompt = env.SPECSERVE_PROMPT;
const messages = [
  { role: 'system', content: 'You complete Python code.' },
  { role: 'user', content: 'def add(a, b):\n    return' },
];

// Every choice, chunk by chunk: text, finish_reason, the specserve statistics, usage.
async function collect(stream, chat) {
  const out = { texts: [], finish: [], stats: [], usage: null, chunks: 0, roles: 0 };
  for await (const c of stream) {
    out.chunks++;
    if (c.usage) out.usage = c.usage;
    for (const ch of c.choices) {
      const piece = chat ? ch.delta?.content : ch.text;
      out.texts[ch.index] = (out.texts[ch.index] ?? '') + (piece ?? '');
      if (chat && ch.delta?.role) out.roles++;
      if (ch.finish_reason) {
        out.finish[ch.index] = ch.finish_reason;
        out.stats[ch.index] = c.specserve.choices[0];
      }
    }
  }
  return out;
}

async function activeSessions() {
  let total = 0;
  for (const url of env.SPECSERVE_METRICS.split(' ')) {
    const text = await (await fetch(url)).text();
    for (const line of text.split('\n')) {
      if (line.startsWith('specserve_active_sessions{')) total += Number(line.split(' ').pop());
    }
  }
  return total;
}

test('a greedy completion is the gRPC API\'s text, with usage and round statistics', async () => {
  const want = grpc('completion');
  const r = await client.completions.create({
    model, prompt, max_tokens: 48, temperature: 0, user: 'ignored', speculative: { drafter: 'model', k: 4 },
  });
  assert.equal(r.object, 'text_completion');
  assert.equal(r.model, model);
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].text, want.text);
  assert.equal(r.choices[0].finish_reason, want.finish_reason);
  assert.equal(r.usage.prompt_tokens, Number(env.SPECSERVE_PROMPT_TOKENS));  // the tokenizer's count
  assert.equal(r.usage.prompt_tokens, want.stats.prompt_tokens);
  assert.equal(r.usage.completion_tokens, want.token_ids.length);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
  assert.equal(r.id, `cmpl-${r._request_id}`);  // the X-Request-Id header, read by the client
  const s = r.specserve.choices[0];
  assert.equal(s.drafter, 'model');
  assert.ok(s.rounds > 0 && s.drafted > 0 && s.accepted <= s.drafted, JSON.stringify(s));
  assert.ok(Math.abs(s.tokens_per_pass - r.usage.completion_tokens / s.rounds) < 1e-9);
});

test('a streamed completion has the same text and usage', async () => {
  const want = grpc('completion');
  const stream = await client.completions.create({
    model, prompt, max_tokens: 48, temperature: 0, stream: true, stream_options: { include_usage: true },
  });
  const got = await collect(stream, false);
  assert.equal(got.texts[0], want.text);
  assert.equal(got.finish[0], want.finish_reason);
  assert.ok(got.chunks > 2, `${got.chunks} chunks`);
  assert.deepEqual(got.usage, {
    prompt_tokens: want.stats.prompt_tokens,
    completion_tokens: want.token_ids.length,
    total_tokens: want.stats.prompt_tokens + want.token_ids.length,
  });
});

test('a streamed chat is the gRPC API\'s text for the ChatML prompt', async () => {
  // The gRPC request is the ChatML text, with <|im_end|> as its stop string.
  const want = grpc('chat');
  assert.ok(want.text.length > 0);
  const stream = await client.chat.completions.create({
    model, messages, max_tokens: 48, temperature: 0, stream: true, speculative: { drafter: 'model', k: 4 },
  });
  const got = await collect(stream, true);
  assert.equal(got.roles, 1);
  assert.equal(got.texts[0], want.text);
  assert.equal(got.finish[0], want.finish_reason);
  assert.ok(got.stats[0].rounds > 0);
  assert.equal(got.usage, null);  // not asked for
  const whole = await client.chat.completions.create({ model, messages, max_tokens: 48, temperature: 0 });
  assert.equal(whole.object, 'chat.completion');
  assert.equal(whole.choices[0].message.role, 'assistant');
  assert.equal(whole.choices[0].message.content, want.text);
  assert.equal(whole.usage.prompt_tokens, want.stats.prompt_tokens);
});

test('models list and retrieve the target', async () => {
  const m = await client.models.retrieve(model);
  assert.equal(m.id, model);
  assert.equal(m.object, 'model');
  await assert.rejects(client.models.retrieve('no-such-model'), OpenAI.NotFoundError);
});

test('bad requests get 400 with an OpenAI error body', async () => {
  await assert.rejects(client.completions.create({ model, prompt, temperature: 5 }), (e) => {
    assert.ok(e instanceof OpenAI.BadRequestError, String(e));
    assert.equal(e.status, 400);
    assert.equal(e.param, 'temperature');
    assert.equal(e.type, 'invalid_request_error');
    return true;
  });
  await assert.rejects(client.completions.create({ model, prompt, max_tokens: 100000 }), OpenAI.BadRequestError);
  await assert.rejects(client.completions.create({ model, prompt, logprobs: 21 }), (e) => {
    assert.equal(e.status, 400);
    assert.equal(e.param, 'logprobs');
    return true;
  });
  await assert.rejects(client.chat.completions.create({ model, messages, logprobs: true, top_logprobs: 21 }), (e) => {
    assert.equal(e.status, 400);
    assert.equal(e.param, 'top_logprobs');
    return true;
  });
  await assert.rejects(client.chat.completions.create({ model, messages, top_logprobs: 2 }), (e) => {
    assert.equal(e.status, 400);
    assert.equal(e.param, 'top_logprobs');
    return true;
  });
  await assert.rejects(client.chat.completions.create({ model, messages: [] }), OpenAI.BadRequestError);
  await assert.rejects(client.completions.create({ model: 'no-such-model', prompt }), (e) => {
    assert.ok(e instanceof OpenAI.NotFoundError, String(e));
    assert.equal(e.code, 'model_not_found');
    return true;
  });
});

test('the API key is enforced', async () => {
  const wrong = new OpenAI({ baseURL: env.SPECSERVE_BASE_URL, apiKey: 'sk-wrong', maxRetries: 0 });
  await assert.rejects(wrong.completions.create({ model, prompt }), (e) => {
    assert.ok(e instanceof OpenAI.AuthenticationError, String(e));
    assert.equal(e.status, 401);
    return true;
  });
});

test('n = 2 gives two indexed choices; a seed repeats them', async () => {
  const ask = () => client.completions.create({
    model, prompt, max_tokens: 16, temperature: 0.9, seed: 3, n: 2, speculative: { k: 3 },
  });
  const a = await ask();
  assert.deepEqual(a.choices.map((c) => c.index), [0, 1]);
  assert.equal(a.specserve.choices.length, 2);
  const tokens = a.specserve.choices.length && a.usage.completion_tokens;
  assert.ok(tokens > 0);
  const b = await ask();
  assert.deepEqual(b.choices.map((c) => c.text), a.choices.map((c) => c.text));
  const stream = await client.chat.completions.create({ model, messages, max_tokens: 8, temperature: 0, n: 2, stream: true });
  const got = await collect(stream, true);
  assert.equal(got.roles, 2);
  assert.equal(got.texts.length, 2);
  assert.equal(got.texts[0], got.texts[1]);  // greedy: both choices alike
});

test('stop strings end the text before them', async () => {
  const want = grpc('completion').text;
  let p = 5;
  while (p + 3 <= want.length && want.slice(p, p + 3).trim().length < 3) p++;
  assert.ok(p + 3 <= want.length, `no stop string in ${JSON.stringify(want)}`);
  const stop = want.slice(p, p + 3);
  const r = await client.completions.create({ model, prompt, max_tokens: 48, temperature: 0, stop: [stop, 'never seen'] });
  assert.equal(r.choices[0].text, want.slice(0, want.indexOf(stop)));
  assert.equal(r.choices[0].finish_reason, 'stop');
});

test('a client abort mid-stream cancels the request and closes both services\' sessions', async () => {
  const long = grpc('long');
  assert.ok(long.token_ids.length >= 200, `the long answer has ${long.token_ids.length} tokens`);
  const requestId = `abort-${Date.now()}`;
  const controller = new AbortController();
  const stream = await client.completions.create(
    { model, prompt, max_tokens: long.token_ids.length, temperature: 0, stream: true, speculative: { drafter: 'model', k: 1 } },
    { signal: controller.signal, headers: { 'X-Request-Id': requestId } },
  );
  let pieces = 0;
  for await (const c of stream) {
    if (c.choices[0]?.text && ++pieces === 2) {
      controller.abort();
      break;
    }
  }
  assert.equal(pieces, 2);
  // The coordinator logs the request as cancelled, short of its length...
  let line;
  for (let i = 0; i < 100 && !line; i++) {
    line = fs.readFileSync(env.SPECSERVE_COORD_LOG, 'utf8').split('\n').find((l) => l.includes(`request_id=${requestId} `));
    if (!line) await new Promise((r) => setTimeout(r, 100));
  }
  assert.ok(line, 'no log line for the aborted request');
  assert.match(line, /client gone: cancelled/);
  const done = Number(/completion_tokens=(\d+)/.exec(line)[1]);
  assert.ok(done < long.token_ids.length, line);
  // ...and neither service keeps a session open.
  let open = -1;
  for (let i = 0; i < 100 && open !== 0; i++) {
    open = await activeSessions();
    if (open !== 0) await new Promise((r) => setTimeout(r, 100));
  }
  assert.equal(open, 0);
});

// Logprobs (docs/http_api.md "Logprobs"): the target's raw log-probabilities,
// the same with speculation as with plain decoding.
const near = (a, b, what) => assert.ok(Math.abs(a - b) <= 1e-4, `${what}: ${a} vs ${b}`);

test('completion logprobs: same text, plain decoding\'s values, the greedy token on top', async () => {
  const want = grpc('completion');
  const ask = (speculative) => client.completions.create({
    model, prompt, max_tokens: 48, temperature: 0, logprobs: 5, speculative,
  });
  const spec = await ask({ drafter: 'model', k: 4 });
  const plain = await ask({ drafter: 'none' });
  assert.equal(spec.choices[0].text, want.text);  // unchanged by asking for logprobs
  const lp = spec.choices[0].logprobs, ref = plain.choices[0].logprobs;
  assert.equal(lp.tokens.length, want.token_ids.length);
  assert.equal(lp.tokens.join(''), spec.choices[0].text);
  assert.deepEqual(lp.tokens, ref.tokens);
  assert.equal(lp.text_offset[0], 0);
  for (let i = 0; i < lp.tokens.length; i++) {
    near(lp.token_logprobs[i], ref.token_logprobs[i], `token ${i}`);
    assert.ok(lp.token_logprobs[i] <= 0);
    const top = Object.entries(lp.top_logprobs[i]);
    assert.ok(top.length >= 5 && top.length <= 6, JSON.stringify(top));
    const best = top.reduce((a, b) => (b[1] > a[1] ? b : a));
    assert.equal(best[0], lp.tokens[i], `token ${i} is not the top-1`);
    near(best[1], lp.token_logprobs[i], `top-1 ${i}`);
    if (i > 0) assert.equal(lp.text_offset[i], lp.text_offset[i - 1] + [...lp.tokens[i - 1]].length);
  }
});

test('chat logprobs, whole and streamed, through the openai client\'s types', async () => {
  const want = grpc('chat');
  const whole = await client.chat.completions.create({
    model, messages, max_tokens: 48, temperature: 0, logprobs: true, top_logprobs: 3,
    speculative: { drafter: 'model', k: 4 },
  });
  assert.equal(whole.choices[0].message.content, want.text);
  const content = whole.choices[0].logprobs.content;
  assert.equal(content.length, whole.usage.completion_tokens);
  for (const [i, t] of content.entries()) {
    assert.equal(typeof t.token, 'string');
    assert.ok(Array.isArray(t.bytes));
    assert.equal(t.top_logprobs.length, 3);
    assert.equal(t.top_logprobs[0].token, t.token, `token ${i} is not the top-1`);
    near(t.top_logprobs[0].logprob, t.logprob, `top-1 ${i}`);
    assert.ok(t.top_logprobs[1].logprob <= t.top_logprobs[0].logprob);
  }
  const plain = await client.chat.completions.create({
    model, messages, max_tokens: 48, temperature: 0, logprobs: true, speculative: { drafter: 'none' },
  });
  const ref = plain.choices[0].logprobs.content;
  assert.equal(ref.length, content.length);
  for (let i = 0; i < ref.length; i++) {
    assert.equal(ref[i].token, content[i].token);
    near(ref[i].logprob, content[i].logprob, `chat token ${i}`);
    assert.deepEqual(ref[i].top_logprobs, []);
  }
  // Streamed: each chunk carries its own tokens' entries; together, the whole list.
  const stream = await client.chat.completions.create({
    model, messages, max_tokens: 48, temperature: 0, logprobs: true, top_logprobs: 3, stream: true,
    stream_options: { include_usage: true }, speculative: { drafter: 'model', k: 4 },
  });
  const streamed = [];
  let text = '';
  for await (const c of stream) {
    for (const ch of c.choices) {
      text += ch.delta?.content ?? '';
      if (ch.logprobs?.content) streamed.push(...ch.logprobs.content);
    }
  }
  assert.equal(text, want.text);
  assert.equal(streamed.length, content.length);
  for (let i = 0; i < streamed.length; i++) {
    assert.equal(streamed[i].token, content[i].token);
    near(streamed[i].logprob, content[i].logprob, `streamed token ${i}`);
  }
  // Without logprobs: null.
  const none = await client.chat.completions.create({ model, messages, max_tokens: 4, temperature: 0 });
  assert.equal(none.choices[0].logprobs, null);
});
