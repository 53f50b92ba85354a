// A sample event next to a component: data with a `version` field (as Drive files have), no code.
export default {
  id: 42,
  name: "A sample event, not a component",
  version: "7",
};
