// Structured output and function calling through the official openai
// JavaScript client, against the three real servers started by
// tests/http/openai_http_test.sh (ChatML: the bundled models have no chat
// template, so tools are described in a system message; the tool-call forms
// of other templates are tests/openai_tools_test.cc's).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { client, model } from './openai_server.mjs';

const messages = [
  { role: 'system', content: 'You write JSON.' },
  { role: 'user', content: 'A person called Ada, aged 36.' },
];

const person = {
  type: 'object',
  properties: {
    name: { type: 'string', maxLength: 12 },
    age: { type: 'integer', minimum: 0, maximum: 120 },
    role: { enum: ['admin', 'user'] },
  },
  required: ['name', 'age', 'role'],
  additionalProperties: false,
};

function checkPerson(text) {
  const p = JSON.parse(text);
  assert.deepEqual(Object.keys(p), ['name', 'age', 'role']);  // the schema's order
  assert.equal(typeof p.name, 'string');
  assert.ok([...p.name].length <= 12, p.name);
  assert.ok(Number.isInteger(p.age) && p.age >= 0 && p.age <= 120, String(p.age));
  assert.ok(['admin', 'user'].includes(p.role), p.role);
}

test('response_format json_schema: the text validates, the same at every K and streamed', async () => {
  const format = { type: 'json_schema', json_schema: { name: 'person', schema: person, strict: true } };
  const texts = [];
  for (const k of [0, 1, 4]) {
    const r = await client.chat.completions.create({
      model, messages, max_tokens: 96, temperature: 0, response_format: format, speculative: { drafter: 'model', k },
    });
    assert.equal(r.choices[0].finish_reason, 'stop');
    checkPerson(r.choices[0].message.content);
    texts.push(r.choices[0].message.content);
  }
  assert.equal(texts[1], texts[0]);  // greedy constrained speculation is plain constrained greedy
  assert.equal(texts[2], texts[0]);
  const stream = await client.chat.completions.create({
    model, messages, max_tokens: 96, temperature: 0, response_format: format, stream: true,
  });
  let text = '';
  for await (const c of stream) text += c.choices[0]?.delta?.content ?? '';
  assert.equal(text, texts[0]);
  // Sampled output validates too.
  const sampled = await client.chat.completions.create({
    model, messages, max_tokens: 96, temperature: 1, seed: 5, n: 3, response_format: format,
  });
  for (const c of sampled.choices) checkPerson(c.message.content);
});

test('response_format json_object is one JSON object', async () => {
  const r = await client.completions.create({
    model, prompt: 'config = ', max_tokens: 64, temperature: 0.7, seed: 3, response_format: { type: 'json_object' },
  });
  if (r.choices[0].finish_reason === 'stop') {
    const v = JSON.parse(r.choices[0].text);
    assert.equal(typeof v, 'object');
    assert.ok(v !== null && !Array.isArray(v));
  } else {
    assert.equal(r.choices[0].finish_reason, 'length');
    assert.ok(r.choices[0].text.trimStart().startsWith('{'), r.choices[0].text);
  }
});

const tools = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'The weather in a city',
      parameters: {
        type: 'object',
        properties: { city: { type: 'string', maxLength: 16 }, unit: { enum: ['c', 'f'] } },
        required: ['city', 'unit'],
      },
    },
  },
  {
    type: 'function',
    function: { name: 'get_time', parameters: { type: 'object', properties: { zone: { enum: ['utc', 'cet'] } }, required: ['zone'] } },
  },
];
const ask = [{ role: 'user', content: 'What is the weather in Paris?' }];

function checkWeather(call) {
  assert.equal(call.type, 'function');
  assert.match(call.id, /^call_[A-Za-z0-9]{24}$/);
  assert.equal(call.function.name, 'get_weather');
  const args = JSON.parse(call.function.arguments);
  assert.equal(typeof args.city, 'string');
  assert.ok(['c', 'f'].includes(args.unit), args.unit);
}

test('a named tool call: tool_calls with schema-valid arguments, whole and streamed', async () => {
  const tool_choice = { type: 'function', function: { name: 'get_weather' } };
  const r = await client.chat.completions.create({ model, messages: ask, tools, tool_choice, max_tokens: 64, temperature: 0 });
  const c = r.choices[0];
  assert.equal(c.finish_reason, 'tool_calls');
  assert.equal(c.message.content, null);
  assert.equal(c.message.tool_calls.length, 1);
  checkWeather(c.message.tool_calls[0]);

  const stream = await client.chat.completions.create({
    model, messages: ask, tools, tool_choice, max_tokens: 64, temperature: 0, stream: true,
  });
  const calls = [];
  let finish = null;
  let chunksWithArguments = 0;
  for await (const chunk of stream) {
    const ch = chunk.choices[0];
    if (!ch) continue;
    for (const d of ch.delta?.tool_calls ?? []) {
      if (d.function?.arguments) chunksWithArguments++;
      calls[d.index] ??= { id: d.id, type: d.type, function: { name: '', arguments: '' } };
      calls[d.index].function.name += d.function?.name ?? '';
      calls[d.index].function.arguments += d.function?.arguments ?? '';
    }
    finish = ch.finish_reason ?? finish;
  }
  assert.equal(finish, 'tool_calls');
  assert.equal(calls.length, 1);
  checkWeather(calls[0]);
  // The arguments streamed as they were generated; greedy: the same call as whole.
  assert.ok(chunksWithArguments > 1, String(chunksWithArguments));
  assert.equal(calls[0].function.arguments.trim(), c.message.tool_calls[0].function.arguments);
});

test('tool_choice required calls listed functions; the result goes back as a tool message', async () => {
  const r = await client.chat.completions.create({
    model, messages: ask, tools, tool_choice: 'required', parallel_tool_calls: false, max_tokens: 96, temperature: 0,
    speculative: { drafter: 'model', k: 4 },
  });
  const c = r.choices[0];
  assert.equal(c.finish_reason, 'tool_calls');
  assert.equal(c.message.tool_calls.length, 1);
  const call = c.message.tool_calls[0];
  assert.ok(['get_weather', 'get_time'].includes(call.function.name), call.function.name);
  JSON.parse(call.function.arguments);
  // The conversation continues with the call and its result, as SDK users send it.
  const next = await client.chat.completions.create({
    model, tools, max_tokens: 8, temperature: 0,
    messages: [...ask, c.message, { role: 'tool', tool_call_id: call.id, content: 'sunny, 21 C' }],
  });
  assert.ok(['stop', 'length', 'tool_calls'].includes(next.choices[0].finish_reason));
});

test('bad tools and schemas are 400s naming the field', async () => {
  const bad = async (body, param) => {
    await assert.rejects(client.chat.completions.create({ model, messages: ask, max_tokens: 4, ...body }), (e) => {
      assert.ok(e instanceof OpenAI.BadRequestError, String(e));
      assert.equal(e.param, param, e.message);
      return true;
    });
  };
  await bad({ tools: [{ type: 'function', function: { name: 'no spaces' } }] }, 'tools');
  await bad({ tools, tool_choice: { type: 'function', function: { name: 'launch' } } }, 'tool_choice');
  await bad({ tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: { a: { oneOf: [] } } } } }],
              tool_choice: 'required' }, 'tools');
  await bad({ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object', properties: { a: { not: {} } } } } } },
            'response_format');
});

test('echo starts each completion with the prompt, whole and streamed', async () => {
  const prompt = 'def add(a, b):';
  const plain = await client.completions.create({ model, prompt, max_tokens: 8, temperature: 0 });
  const echoed = await client.completions.create({ model, prompt, max_tokens: 8, temperature: 0, echo: true });
  assert.equal(echoed.choices[0].text, prompt + plain.choices[0].text);
  const stream = await client.completions.create({ model, prompt, max_tokens: 8, temperature: 0, echo: true, stream: true });
  let text = '';
  for await (const c of stream) text += c.choices[0]?.text ?? '';
  assert.equal(text, echoed.choices[0].text);
  assert.equal(echoed.usage.completion_tokens, plain.usage.completion_tokens);
});
