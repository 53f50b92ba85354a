// The runner function's own code (RunnerFunction, nodejs22.x): the runner itself is the
// RunnerLayer, unpacked by Lambda at /opt/nodejs/runner (scripts/package_aws.py, docs/aws.md).
export { handler } from '/opt/nodejs/runner/src/lambda.mjs'
