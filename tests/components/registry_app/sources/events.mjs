export default [
  "created",
  "updated",
];
