// The /map page in headless Chromium (issue 37): the time from navigation until the view is
// drawn, and the page's JS heap, for a world view and a city view. A script, not a test.
//
//   cd bench/browser && npm install
//   node map.mjs --target http://127.0.0.1:8080 [--runs 5] [--chromium /usr/bin/chromium]
//
// The airq server must load Leaflet and tiles from this script's asset server (nothing beyond
// this machine is fetched): start it with
//   AIRQ_MAP_LIBRARY_URL=http://127.0.0.1:18438/leaflet/
//   AIRQ_MAP_TILE_URL='http://127.0.0.1:18438/tiles/{z}/{x}/{y}.svg'
// (--assets-port changes 18438). Leaflet is the npm package's dist/ (the version the server's
// integrity values pin); tiles are small stand-in SVGs.
//
// "Drawn": the page's status line says how many devices are in view, which it writes right
// after drawing the answer of its first poll of the clusters feed (src/web/map.js); the time is
// the page's performance.now() at that moment, i.e. since navigation started. Each run is a new
// browser context (no cache). Heap: CDP Runtime.getHeapUsage right after the view is drawn
// (used, without forcing a collection) and after HeapProfiler.collectGarbage.

import { createServer } from 'node:http';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import { chromium } from 'playwright-core';

function option(name, fallback) {
  const at = process.argv.indexOf(`--${name}`);
  return at > 0 && at + 1 < process.argv.length ? process.argv[at + 1] : fallback;
}

const target = option('target', 'http://127.0.0.1:8080');
const runs = Number(option('runs', '5'));
const executablePath = option('chromium', '/usr/bin/chromium');
const assetsPort = Number(option('assets-port', '18438'));
const width = Number(option('width', '1280'));
const height = Number(option('height', '800'));

const VIEWS = [
  { name: 'world (zoom 2)', query: '' },
  { name: 'city (zoom 12, Berlin)', query: '?lat=52.52&lon=13.42&zoom=12' },
];

const here = path.dirname(fileURLToPath(import.meta.url));
const dist = path.join(here, 'node_modules', 'leaflet', 'dist');
const TILE = '<svg xmlns="http://www.w3.org/2000/svg" width="256" height="256">'
  + '<rect width="256" height="256" fill="#eef1f4" stroke="#d5dae1"/></svg>';

const assets = createServer(async (request, response) => {
  const url = new URL(request.url, 'http://localhost');
  const cors = { 'Access-Control-Allow-Origin': '*', 'Cache-Control': 'no-store' };
  if (url.pathname.startsWith('/tiles/')) {
    response.writeHead(200, { ...cors, 'Content-Type': 'image/svg+xml' });
    response.end(TILE);
    return;
  }
  if (url.pathname.startsWith('/leaflet/')) {
    const file = path.join(dist, path.normalize(url.pathname.slice('/leaflet/'.length)));
    if (!file.startsWith(dist)) { response.writeHead(404, cors); response.end(); return; }
    try {
      const body = await readFile(file);
      const type = file.endsWith('.js') ? 'text/javascript' : file.endsWith('.css') ? 'text/css' : 'image/png';
      response.writeHead(200, { ...cors, 'Content-Type': type });
      response.end(body);
    } catch {
      response.writeHead(404, cors);
      response.end();
    }
    return;
  }
  response.writeHead(404, cors);
  response.end();
});
await new Promise((resolve) => assets.listen(assetsPort, '127.0.0.1', resolve));

const browser = await chromium.launch({
  executablePath,
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--enable-precise-memory-info'],
});

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

const results = [];
for (const view of VIEWS) {
  const samples = [];
  for (let run = 0; run < runs; run += 1) {
    const context = await browser.newContext({ viewport: { width, height } });
    const page = await context.newPage();
    const cdp = await context.newCDPSession(page);
    await page.goto(`${target}/map${view.query}`, { waitUntil: 'commit' });
    const drawn = await page.waitForFunction(() => {
      const status = document.getElementById('map-status');
      const map = document.getElementById('map');
      if (!status || !map || !map.airqDrawn || !/in view/.test(status.textContent)) { return null; }
      return {
        ms: performance.now(),
        status: status.textContent,
        markers: map.airqDrawn().length,
      };
    }, null, { polling: 'raf', timeout: 60_000 }).then((handle) => handle.jsonValue());
    const used = await cdp.send('Runtime.getHeapUsage');
    await cdp.send('HeapProfiler.enable');
    await cdp.send('HeapProfiler.collectGarbage');
    const collected = await cdp.send('Runtime.getHeapUsage');
    const feed = await page.evaluate(() => performance.getEntriesByType('resource')
      .filter((entry) => entry.name.includes('/api/v1/public/map/clusters'))
      .map((entry) => ({ bytes: entry.encodedBodySize, ms: entry.duration }))[0] || null);
    samples.push({
      drawn_ms: drawn.ms,
      markers: drawn.markers,
      status: drawn.status,
      heap_used_mb: used.usedSize / 1048576,
      heap_total_mb: used.totalSize / 1048576,
      heap_after_gc_mb: collected.usedSize / 1048576,
      feed,
    });
    await context.close();
  }
  const summary = {
    view: view.name,
    runs: samples.length,
    drawn_ms_median: median(samples.map((s) => s.drawn_ms)),
    drawn_ms_max: Math.max(...samples.map((s) => s.drawn_ms)),
    heap_used_mb_median: median(samples.map((s) => s.heap_used_mb)),
    heap_total_mb_max: Math.max(...samples.map((s) => s.heap_total_mb)),
    heap_after_gc_mb_median: median(samples.map((s) => s.heap_after_gc_mb)),
    markers: samples[0].markers,
    status: samples[0].status.replace(/ · updated .*/, ''),
    feed: samples[0].feed,
    samples,
  };
  results.push(summary);
  console.log(`${view.name}: ${summary.status}, ${summary.markers} markers drawn; `
    + `drawn after ${summary.drawn_ms_median.toFixed(0)} ms (median of ${runs}, max ${summary.drawn_ms_max.toFixed(0)}); `
    + `JS heap ${summary.heap_used_mb_median.toFixed(1)} MB used (${summary.heap_after_gc_mb_median.toFixed(1)} MB after GC, `
    + `${summary.heap_total_mb_max.toFixed(1)} MB allocated at most); feed ${summary.feed ? summary.feed.bytes : '?'} B`);
}

await browser.close();
assets.close();
const out = option('json', null);
if (out) {
  const { writeFile } = await import('node:fs/promises');
  await writeFile(out, JSON.stringify({ target, runs, viewport: [width, height], results }, null, 2));
  console.error(`results written to ${out}`);
}
