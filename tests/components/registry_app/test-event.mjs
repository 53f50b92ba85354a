export default {
  id: 42,
  name: "A sample event, not a component",
};
