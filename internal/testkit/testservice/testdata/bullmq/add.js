'use strict';
// node add.js REDIS_URL QUEUE NAME DATA_JSON [JOB_ID]: adds one job with
// BullMQ's own Queue.add, as a user's producer does, and prints its id;
// queue's tests compare tare's jobs with it.
const { Queue } = require('bullmq');

const [url, queue, name, data, jobId] = process.argv.slice(2);
const redis = new URL(url);
const q = new Queue(queue, {
  connection: { host: redis.hostname, port: Number(redis.port || 6379), db: Number(redis.pathname.slice(1) || 0) },
});
q.add(name, JSON.parse(data), jobId ? { jobId } : undefined)
  .then(job => console.log(job.id))
  .finally(() => q.close());
