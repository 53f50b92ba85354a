// AWS Lambda entry point: the event is the request. Partial `respond` lines have no channel
// back on Lambda, so they are collected into `partials` of the response.
import { handle } from './handle.mjs'

export const handler = async (event) => {
  const partials = []
  const res = await handle(event, (p) => partials.push(p))
  if (partials.length) res.partials = partials
  return res
}
