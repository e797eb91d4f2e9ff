'use strict';
// A BullMQ worker of the kind users run, for tare's tests (queue,
// cmd/tare): its processor dispatches on the job's name. "answer" calls
// the simulated model ($TARE_TEST_MODEL) with the job's prompt (after
// sleeping its sleep_ms, when it has one) and returns {seq, tokens}; "boom"
// throws a TypeError; any other name throws, as a processor does with a
// job it does not handle.
const { Worker } = require('bullmq');

const env = process.env;
const redis = new URL(env.TARE_TEST_REDIS);
const lockMs = Number(env.TARE_TEST_LOCK_MS || 0);

async function complete(prompt) {
  const res = await fetch(env.TARE_TEST_MODEL + '/v1/chat/completions', {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ messages: [{ role: 'user', content: prompt }], max_tokens: 8, stream: false }),
    signal: AbortSignal.timeout(30000),
  });
  if (!res.ok) throw new Error(`the model answered ${res.status}`);
  const answer = await res.json();
  return answer.usage.completion_tokens;
}

const handlers = {
  answer: async job => {
    if (job.data.sleep_ms) await new Promise(resolve => setTimeout(resolve, job.data.sleep_ms));
    return { seq: job.data.seq, tokens: await complete(job.data.prompt || 'hello') };
  },
  boom: async job => { throw new TypeError(`boom ${job.data.seq}`); },
};

const opts = {
  connection: { host: redis.hostname, port: Number(redis.port || 6379), db: Number(redis.pathname.slice(1) || 0) },
  concurrency: 2,
};
if (env.TARE_TEST_WORKER_NAME) opts.name = env.TARE_TEST_WORKER_NAME;
if (lockMs > 0) {
  // A killed worker's jobs go back to the queue within seconds, not
  // BullMQ's default 30 s.
  opts.lockDuration = lockMs;
  opts.stalledInterval = Math.max(lockMs / 2, 500);
}
if (env.TARE_TEST_REMOVE === '1') {
  opts.removeOnComplete = { count: 0 };
  opts.removeOnFail = { count: 0 };
}

const worker = new Worker(env.TARE_TEST_QUEUE || 'agents', async job => {
  const handle = handlers[job.name];
  if (!handle) throw new Error(`unknown job name ${job.name}`);
  return handle(job);
}, opts);
worker.on('error', err => console.error('worker error:', err.message));
for (const sig of ['SIGTERM', 'SIGINT']) {
  process.on(sig, () => worker.close().then(() => process.exit(0)));
}
