// onnxruntime-web (wasm backend) worker for runtime_reach.py, run by node.
// One JSON task per stdin line: {"id", "path", "inputs": [{"name", "type", "dims", "b64"}]};
// one JSON answer per stdout line: {"id", "ok": true, "outputs": [...]} (same fields) or
// {"id", "ok": false, "stage", "error"}. Tensors travel as the raw little-endian bytes of
// their typed arrays (bool as Uint8Array, float16 as Uint16Array bits). onnxruntime-web has
// no bfloat16 tensor type: runtime_reach.py wraps such models in Casts from and to float.
const fs = require('fs');
const readline = require('readline');
const ort = require('onnxruntime-web');

ort.env.wasm.numThreads = 1;
ort.env.logLevel = 'error';

const ARRAYS = {
  bool: Uint8Array, float64: Float64Array, float32: Float32Array, float16: Uint16Array,
  int8: Int8Array, int16: Int16Array, int32: Int32Array, int64: BigInt64Array,
  uint8: Uint8Array, uint16: Uint16Array, uint32: Uint32Array, uint64: BigUint64Array,
};

function tensor(spec) {
  const bytes = Buffer.from(spec.b64, 'base64');
  const buffer = new ArrayBuffer(bytes.length);
  new Uint8Array(buffer).set(bytes);
  return new ort.Tensor(spec.type, new ARRAYS[spec.type](buffer), spec.dims);
}

function firstLine(error) {
  const text = (error && (error.message || String(error))) || 'unknown error';
  return text.split('\n').find((line) => line.trim().length > 0) || text;
}

async function handle(task) {
  let session;
  try {
    session = await ort.InferenceSession.create(fs.readFileSync(task.path), {
      executionProviders: ['wasm'],
    });
  } catch (error) {
    return { id: task.id, ok: false, stage: 'load', error: firstLine(error) };
  }
  try {
    const feeds = {};
    for (const spec of task.inputs) feeds[spec.name] = tensor(spec);
    const results = await session.run(feeds);
    const outputs = session.outputNames.map((name) => {
      const data = results[name].data;
      return {
        name, type: results[name].type, dims: Array.from(results[name].dims),
        b64: Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('base64'),
      };
    });
    return { id: task.id, ok: true, outputs };
  } catch (error) {
    return { id: task.id, ok: false, stage: 'run', error: firstLine(error) };
  } finally {
    await session.release().catch(() => {});
  }
}

const queue = [];
let busy = false;
async function pump() {
  if (busy) return;
  busy = true;
  while (queue.length) process.stdout.write(JSON.stringify(await handle(queue.shift())) + '\n');
  busy = false;
}
const lines = readline.createInterface({ input: process.stdin });
lines.on('line', (line) => { if (line.trim()) { queue.push(JSON.parse(line)); pump(); } });
lines.on('close', async () => {
  while (busy || queue.length) await new Promise((resolve) => setTimeout(resolve, 10));
  process.exit(0);
});
