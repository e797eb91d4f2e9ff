'use strict';
// node read.js REDIS_URL QUEUE JOB_ID: reads one job back with BullMQ's
// own Job.fromId, as a worker does, and prints its name and data.
const { Queue, Job } = require('bullmq');

const [url, queue, id] = process.argv.slice(2);
const redis = new URL(url);
const q = new Queue(queue, {
  connection: { host: redis.hostname, port: Number(redis.port || 6379), db: Number(redis.pathname.slice(1) || 0) },
  skipMetasUpdate: true,
});
Job.fromId(q, id)
  .then(job => console.log(job ? `${job.name} ${JSON.stringify(job.data)}` : 'no such job'))
  .finally(() => q.close());
