export default {
  key: "bad-missing-run",
  name: "New Form Submission",
  version: "0.0.1",
  type: "source",
  props: {
    http: "$.interface.http",
    formId: {
      type: "string",
      label: "Form ID",
    },
  },
  methods: {
    isSubmission(event) {
      return event.body?.form_id === this.formId;
    },
  },
};
