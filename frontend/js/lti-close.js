// @ts-check
// The last page of LTI Dynamic Registration: tell the platform's window that the tool is registered
// (IMS LTI Dynamic Registration 1.0, the org.imsglobal.lti.close message), so it closes the dialog.
(window.opener || window.parent).postMessage({ subject: "org.imsglobal.lti.close" }, "*");
