// The neighbour: the error is made on line 4.
export function explode(what) {
  const why = `exploded ${what}`
  throw new Error(why)
}
