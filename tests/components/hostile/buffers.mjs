// Threat 3: memory outside the V8 heap (Buffers), 24 x 64 MB, held in one synchronous loop.
export default {
  name: "Hostile buffers",
  version: "0.0.1",
  props: { http: "$.interface.http" },
  async run() {
    const held = [];
    for (let i = 0; i < 24; i++) held.push(Buffer.alloc(64 * 1024 * 1024, 1));
    this.$emit({ held: held.length });
  },
};
