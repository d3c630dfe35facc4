// N tasks, each a Promise that setTimeout resolves after 10 s, all awaited with Promise.all: the
// Node.js program of async-runtimes-benchmarks-2024 ("Take 2", hez2010), which published
// 41.9 / 64.8 / 125.1 / 563.9 MB at 1 / 10,000 / 100,000 / 1,000,000 tasks on Node 23. Like the
// article's, it sleeps through util.promisify(setTimeout) and has no knob for the 10 s.
//
//	node sleepers.js N
'use strict';

const { promisify } = require('node:util');

const sleep = promisify(setTimeout);
const n = Number(process.argv[2]);
if (!Number.isInteger(n) || n < 1) {
  console.error('usage: node sleepers.js N (a whole number of tasks, at least 1)');
  process.exit(2);
}

async function main() {
  const tasks = [];
  for (let i = 0; i < n; i++) {
    tasks.push(sleep(10_000));
  }
  await Promise.all(tasks);
}

main();
