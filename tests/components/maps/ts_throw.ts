// TypeScript: the types are stripped, so the bundle's columns and lines differ from these.
interface Thing {
  name: string
  size: number
}

function check(thing: Thing): number {
  if (thing.size > 1) throw new RangeError(`too big: ${thing.name}`)
  return thing.size
}

export default {
  name: "Maps TS",
  version: "0.1.0",
  async run(): Promise<void> {
    const thing: Thing = { name: "box", size: 2 }
    check(thing)
  },
}
