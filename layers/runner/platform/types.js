// Headwater's own `@pipedream/types`: the define* helpers return their argument (they exist
// for TypeScript components; the types themselves are erased when bundling).
export const defineApp = (app) => app
export const defineSource = (source) => source
export const defineAction = (action) => action
export const definePropDefinition = (p) => p
export default { defineApp, defineSource, defineAction, definePropDefinition }
